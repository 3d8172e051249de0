//! The progress bar shown on a terminal while a file replays.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use pipeline::daemon::CpuShared;

pub struct Progress {
    handle: JoinHandle<()>,
}

/// Starts a thread that draws the bar until `shared.stop` is set.
pub fn spawn(shared: Arc<CpuShared>, expected: Option<u64>) -> Progress {
    let handle = std::thread::spawn(move || {
        let bar = match expected {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new_spinner(),
        };
        let style = if expected.is_some() {
            "{bar:40} {human_pos}/{human_len} frames, eta {eta}"
        } else {
            "{spinner} {human_pos} frames"
        };
        if let Ok(st) = ProgressStyle::with_template(style) {
            bar.set_style(st);
        }
        while !shared.stop.load(Ordering::Relaxed) {
            bar.set_position(shared.rx_total.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.set_position(shared.rx_total.load(Ordering::Relaxed));
        bar.finish_and_clear();
    });
    Progress { handle }
}

impl Progress {
    pub fn finish(self) {
        let _ = self.handle.join();
    }
}
