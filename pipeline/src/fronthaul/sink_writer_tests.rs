use super::*;
use crate::fronthaul::config::GridFormat;
use crate::fronthaul::grid::SlotKey;
use crate::fronthaul::FnSink;
use std::sync::mpsc::channel;

fn grid(frame: u8) -> SlotGrid {
    let mut g = SlotGrid::new(1, 2, GridFormat::Int16, 1.0);
    g.key = SlotKey {
        frame_id: frame,
        subframe_id: 0,
        slot_id: 0,
    };
    g
}

/// A sink that records the frame ids it got, each delivery waiting for a token first.
struct Gated {
    gate: Receiver<()>,
    got: Arc<Mutex<Vec<u8>>>,
}

impl SlotSink for Gated {
    fn slot(&mut self, g: &SlotGrid) -> Result<(), String> {
        self.gate.recv().map_err(|e| e.to_string())?;
        self.got.lock().unwrap().push(g.key.frame_id);
        Ok(())
    }
}

#[test]
fn slot_returns_while_the_write_waits_and_finish_drains_in_order() {
    let (open, gate) = channel();
    let got = Arc::new(Mutex::new(Vec::new()));
    let inner = Gated {
        gate,
        got: Arc::clone(&got),
    };
    let mut s = BackgroundSink::spawn("test", Box::new(inner)).unwrap();
    // The writer holds one slot and the queue QUEUE_SLOTS: none of these waits for a write.
    for f in 0..=QUEUE_SLOTS as u8 {
        s.slot(&grid(f)).unwrap();
    }
    assert!(
        got.lock().unwrap().is_empty(),
        "a write ran before its gate opened"
    );
    for _ in 0..=QUEUE_SLOTS {
        open.send(()).unwrap();
    }
    s.finish();
    let want: Vec<u8> = (0..=QUEUE_SLOTS as u8).collect();
    assert_eq!(*got.lock().unwrap(), want);
    assert_eq!(s.late_errors(), (0, None));
}

#[test]
fn errors_and_panics_come_back_counted_with_the_first_message() {
    let mut n = 0u32;
    let inner = move |g: &SlotGrid| -> Result<(), String> {
        n += 1;
        match n {
            2 => Err(format!("disk full at frame {}", g.key.frame_id)),
            3 => panic!("a sink bug"),
            _ => Ok(()),
        }
    };
    struct Fallible<F>(F);
    impl<F: FnMut(&SlotGrid) -> Result<(), String> + Send> SlotSink for Fallible<F> {
        fn slot(&mut self, g: &SlotGrid) -> Result<(), String> {
            (self.0)(g)
        }
    }
    let mut s = BackgroundSink::spawn("test", Box::new(Fallible(inner))).unwrap();
    for f in 0..5 {
        s.slot(&grid(f)).unwrap();
    }
    s.finish();
    let (count, first) = s.late_errors();
    assert_eq!(count, 2);
    assert_eq!(first.as_deref(), Some("disk full at frame 1"));
    // Taken: the next call has none, and the writer goes on after the panic.
    assert_eq!(s.late_errors(), (0, None));
    s.slot(&grid(9)).unwrap();
    s.finish();
    assert_eq!(s.late_errors(), (0, None));
}

#[test]
fn dropping_it_delivers_what_is_queued() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let mine = Arc::clone(&got);
    let inner = FnSink(move |g: &SlotGrid| {
        std::thread::sleep(std::time::Duration::from_millis(5));
        mine.lock().unwrap().push(g.key.frame_id);
    });
    let mut s = BackgroundSink::spawn("test", Box::new(inner)).unwrap();
    for f in 0..3 {
        s.slot(&grid(f)).unwrap();
    }
    drop(s);
    assert_eq!(*got.lock().unwrap(), vec![0, 1, 2]);
}
