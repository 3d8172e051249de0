//! Pinning the calling thread to one CPU core (Linux `sched_setaffinity`), as DPDK pins its
//! lcores: a polling thread that the scheduler moves between cores, or that shares a core,
//! sees its latency tail grow.

use std::io;
use std::mem::size_of;

/// A thread's CPU set, as [`pin_current_thread`] found it (for [`restore`]).
pub struct SavedAffinity(libc::cpu_set_t);

/// Online CPUs the process may run on, in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = current()?;
    // SAFETY: CPU_ISSET reads the bit `c` of a cpu_set_t we own; c < CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

fn current() -> io::Result<libc::cpu_set_t> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; sched_getaffinity writes at most
    // size_of::<cpu_set_t>() bytes into it (pid 0: the calling thread).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(set)
    }
}

/// Pins the calling thread to `cpu`; returns its previous set. Fails when `cpu` is not one the
/// process may use.
pub fn pin_current_thread(cpu: usize) -> io::Result<SavedAffinity> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is out of range"),
        ));
    }
    let saved = current()?;
    // SAFETY: `set` is a valid cpu_set_t we own, cpu < CPU_SETSIZE (checked above), and
    // sched_setaffinity only reads size_of::<cpu_set_t>() bytes of it (pid 0: this thread).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(SavedAffinity(saved))
}

/// Gives the calling thread back the set [`pin_current_thread`] saved.
pub fn restore(saved: &SavedAffinity) -> io::Result<()> {
    // SAFETY: `saved.0` is a cpu_set_t sched_getaffinity filled; the call reads only it.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &saved.0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_an_allowed_cpu_and_restores() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        let last = *cpus.last().unwrap();
        let t = std::thread::spawn(move || {
            let saved = pin_current_thread(last).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![last]);
            // SAFETY: sched_getcpu has no preconditions.
            let on = unsafe { libc::sched_getcpu() };
            assert_eq!(on as usize, last);
            restore(&saved).unwrap();
            allowed_cpus().unwrap()
        });
        assert_eq!(t.join().unwrap(), cpus);
        assert!(pin_current_thread(libc::CPU_SETSIZE as usize).is_err());
    }
}
