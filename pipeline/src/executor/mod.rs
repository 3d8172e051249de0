//! Executors: `cpu` (a run-to-completion worker per queue) and `gpu` (persistent / launch / graph).
pub mod cpu;
pub mod gpu;
pub mod restart_board;
pub mod tx;
