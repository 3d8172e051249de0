use super::*;
use crate::config::GridFormat;
use crate::grid::SlotKey;
use crate::FnSink;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

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

/// A writer that never finishes its first slot (a FIFO nobody reads, a hung mount): the data
/// path waits `stall` once, then every slot offered is an error at once; `finish` returns
/// after `stall`, counting what the writer held; dropping the sink does not wait for it.
#[test]
fn a_hung_writer_costs_one_wait_and_its_slots_are_counted() {
    let (open, gate) = channel();
    let got = Arc::new(Mutex::new(Vec::new()));
    let inner = Gated {
        gate,
        got: Arc::clone(&got),
    };
    let stall = Duration::from_millis(300);
    let mut s = BackgroundSink::with_stall("test", Box::new(inner), stall).unwrap();
    let t = Instant::now();
    let offered = QUEUE_SLOTS as u8 + 6;
    let refused = (0..offered).filter(|&f| s.slot(&grid(f)).is_err()).count();
    assert_eq!(
        refused,
        usize::from(offered) - 1 - QUEUE_SLOTS,
        "one held, the queue full"
    );
    let waited = t.elapsed();
    assert!(waited >= stall && waited < 4 * stall, "{waited:?}");
    s.finish();
    let (n, first) = s.late_errors();
    assert_eq!(
        n,
        1 + QUEUE_SLOTS as u64,
        "the held and queued slots are lost"
    );
    assert!(first.unwrap_or_default().contains("delivered nothing"));
    assert!(t.elapsed() < 6 * stall, "{:?}", t.elapsed());
    drop(s);
    assert!(got.lock().unwrap().is_empty());
    drop(open);
}

/// A raw sink whose file is a FIFO nobody reads: the background writer hangs in `open`, and
/// the stage's `flush` (the end of a run) still returns, with the slots counted as errors.
#[cfg(unix)]
#[test]
fn a_fifo_nobody_reads_does_not_hang_the_end_of_a_run() {
    let dir = std::env::temp_dir().join(format!("pw-sink-fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("slot_000000_f0_sf0_s0_partial.iq.partial");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
    let cfg = crate::FronthaulConfig::default();
    let raw = crate::raw::RawSink::create(&dir, None, &cfg).unwrap();
    let stall = Duration::from_millis(300);
    let mut s = BackgroundSink::with_stall("raw", Box::new(raw), stall).unwrap();
    let t = Instant::now();
    s.slot(&grid(0)).unwrap();
    s.finish();
    let (n, _) = s.late_errors();
    assert_eq!(n, 1);
    assert!(t.elapsed() < 4 * stall, "{:?}", t.elapsed());
    drop(s);
    // Unblock the writer (it opened the FIFO for writing) so its thread can end.
    let _ = std::fs::File::open(&fifo);
    let _ = std::fs::remove_dir_all(&dir);
}
