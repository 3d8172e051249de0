//! Checked zero-copy packet views (smoltcp `wire` style).
