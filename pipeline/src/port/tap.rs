//! The slow path into the host's network stack: a Linux TAP device (`output.to_host: { tap:
//! { name: IFNAME } }`). Every frame written to the device's file descriptor arrives in the
//! kernel as if received on interface IFNAME, so the host's own stack, `tcpdump -i IFNAME` or a
//! routing daemon sees what the pipeline sent to the host.
//!
//! The device is made (or an existing persistent one attached) with `/dev/net/tun` and the
//! `TUNSETIFF` ioctl, flags `IFF_TAP | IFF_NO_PI` (whole Ethernet frames, no packet-info
//! header in front), and brought up as DPDK's net_tap brings its interface up on start: a
//! frame written to a down interface is dropped by the kernel, silently. A device pktwarp made
//! disappears when the run ends (the descriptor closes); a persistent one stays.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::fd::AsRawFd;

use crate::port::{PortError, TxPort};

/// The device path of the TUN/TAP driver.
pub const TUN_PATH: &str = "/dev/net/tun";

/// Longest interface name in bytes: the kernel's `IFNAMSIZ` (16) less the terminating NUL.
pub const MAX_NAME_LEN: usize = libc::IFNAMSIZ - 1;

/// `output.to_host.tap`.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TapOptions {
    /// The interface name (at most 15 bytes; no `/`, whitespace, `:` or NUL; not `.` / `..`).
    pub name: String,
}

/// Whether `name` is a name the kernel takes for an interface (`dev_valid_name`), with the
/// reason when not. The config check and [`TapTx::open`] both call it.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the interface name is empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "interface name `{name}` is {} bytes; Linux allows at most {MAX_NAME_LEN} (IFNAMSIZ {})",
            name.len(),
            libc::IFNAMSIZ
        ));
    }
    if name == "." || name == ".." {
        return Err(format!("`{name}` is not a valid interface name"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| *c == '/' || *c == ':' || *c == '\0' || c.is_whitespace())
    {
        return Err(format!(
            "interface name `{}` contains {c:?}, which Linux refuses in interface names",
            name.escape_debug()
        ));
    }
    Ok(())
}

/// Why opening `/dev/net/tun` failed, in words an operator can act on.
pub fn explain_open(kind: ErrorKind, e: &std::io::Error) -> String {
    match kind {
        ErrorKind::NotFound => format!(
            "no {TUN_PATH}: this kernel has no TUN/TAP driver (`modprobe tun`) or this \
             container does not expose the device ({e})"
        ),
        ErrorKind::PermissionDenied => format!(
            "no permission to open {TUN_PATH} ({e}): run with CAP_NET_ADMIN (root), or make a \
             persistent TAP owned by this user beforehand (`ip tuntap add NAME mode tap user USER`)"
        ),
        _ => format!("cannot open {TUN_PATH}: {e}"),
    }
}

/// Why `TUNSETIFF` refused `name`, from its errno.
pub fn explain_setiff(errno: i32, name: &str) -> String {
    let e = std::io::Error::from_raw_os_error(errno);
    match errno {
        libc::EPERM | libc::EACCES => format!(
            "no permission to create or attach TAP device `{name}` ({e}): creating one needs \
             CAP_NET_ADMIN; without it, only a persistent TAP owned by this user can be attached"
        ),
        libc::EINVAL => format!(
            "`{name}` exists and is not a TAP device (or the kernel refused the name) ({e}): \
             choose another name"
        ),
        libc::EBUSY => format!("TAP device `{name}` is in use: another process has it open ({e})"),
        _ => format!("TUNSETIFF `{name}`: {e}"),
    }
}

/// A TAP device as a transmit side: each frame is one `write` of the whole Ethernet frame.
pub struct TapTx {
    file: File,
    label: String,
}

impl TapTx {
    /// Makes (or attaches to) TAP device `name` and brings it up. The error says what to do.
    pub fn open(name: &str) -> Result<TapTx, String> {
        let file = attach(name)?;
        set_up(name)?;
        Ok(TapTx {
            file,
            label: format!("tap:{name}"),
        })
    }

    /// Makes (or attaches to) the device and lets it go at once, without bringing it up:
    /// `pktwarp validate`'s check that the run could open it (permission, driver, name).
    pub fn probe(name: &str) -> Result<(), String> {
        attach(name).map(drop)
    }
}

/// Opens `/dev/net/tun` and binds the descriptor to TAP device `name`.
fn attach(name: &str) -> Result<File, String> {
    check_name(name)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(TUN_PATH)
        .map_err(|e| explain_open(e.kind(), &e))?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `req` is (zeroed, its name
    // NUL-terminated by `ifreq`); the descriptor is open for the call's duration.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) };
    if rc < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(explain_setiff(errno, name));
    }
    Ok(file)
}

/// A zeroed `ifreq` holding `name` (checked: at most `IFNAMSIZ - 1` bytes, so it ends in NUL).
fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: `ifreq` is plain C data (a char array and a union of integers, addresses and a
    // pointer); all zero bytes is a valid value of each member.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes().take(MAX_NAME_LEN)) {
        *dst = src as libc::c_char;
    }
    req
}

/// Sets `IFF_UP` on interface `name` unless it is up already (an operator may have brought a
/// persistent TAP up and given this user no right to change it).
fn set_up(name: &str) -> Result<(), String> {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned by `sock` below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!(
            "cannot bring `{name}` up: socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns; the File closes it.
    let sock = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut req = ifreq(name);
    // SAFETY: SIOCGIFFLAGS fills the flags member of the `ifreq` it is given, which `req` is.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    if rc < 0 {
        return Err(format!(
            "cannot read the flags of `{name}`: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: SIOCGIFFLAGS succeeded, so the union holds the flags.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    if i32::from(flags) & libc::IFF_UP != 0 {
        return Ok(());
    }
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads the name and flags of `req`, a valid `ifreq`.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) };
    if rc < 0 {
        return Err(format!(
            "cannot bring `{name}` up ({}): needs CAP_NET_ADMIN, or bring it up beforehand \
             (`ip link set {name} up`)",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

impl TxPort for TapTx {
    /// Writes frames until one is refused: those before it count as sent, the rest of the
    /// burst as failed (a full socket buffer or a frame the driver refuses, such as one
    /// shorter than an Ethernet header). A device that went away (deleted) is an error, which
    /// stops this destination.
    fn tx_burst(&mut self, frames: &mut dyn Iterator<Item = &[u8]>) -> Result<usize, PortError> {
        let mut sent = 0;
        for f in frames {
            match self.file.write(f) {
                Ok(n) if n == f.len() => sent += 1,
                Ok(_) => break,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBADFD | libc::ENODEV)) => {
                    return Err(PortError::Io {
                        path: self.label.clone(),
                        error: e,
                    })
                }
                Err(_) => break,
            }
        }
        Ok(sent)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn name(&self) -> &str {
        &self.label
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_kernel_refuses_are_refused_with_the_reason() {
        assert!(check_name("pw-slow0").is_ok());
        assert!(check_name("a23456789012345").is_ok(), "15 bytes fit");
        let e = check_name("a234567890123456").unwrap_err();
        assert!(e.contains("16 bytes") && e.contains("at most 15"), "{e}");
        // Multi-byte characters count in bytes.
        assert!(check_name("ééééééééé").unwrap_err().contains("18 bytes"));
        assert!(check_name("").unwrap_err().contains("empty"));
        for bad in ["a/b", "a b", "a:1", "tab\t", "nul\0x"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(".").is_err() && check_name("..").is_err());
    }

    #[test]
    fn open_failures_say_what_to_do() {
        let nf = std::io::Error::from(ErrorKind::NotFound);
        assert!(explain_open(ErrorKind::NotFound, &nf).contains("no /dev/net/tun"));
        let pd = std::io::Error::from(ErrorKind::PermissionDenied);
        let m = explain_open(ErrorKind::PermissionDenied, &pd);
        assert!(
            m.contains("no permission") && m.contains("CAP_NET_ADMIN"),
            "{m}"
        );
        let m = explain_setiff(libc::EPERM, "pw0");
        assert!(m.contains("no permission") && m.contains("`pw0`"), "{m}");
        assert!(explain_setiff(libc::EBUSY, "pw0").contains("in use"));
        assert!(explain_setiff(libc::EINVAL, "lo").contains("not a TAP device"));
    }

    #[test]
    fn a_too_long_name_fails_before_any_system_call() {
        let e = TapTx::open("this-name-is-too-long").err().unwrap();
        assert!(e.contains("at most 15"), "{e}");
    }
}
