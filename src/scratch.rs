//! Scratch directories: short paths under a temporary directory that the servers' user
//! can enter. The sandbox keeps its servers' data and sockets in one; a route keeps its
//! relays' Unix sockets in one. Short, because a Unix socket path is capped near 107
//! bytes.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A short directory: `/tmp/cb-XXXXXX` keeps socket paths far below the 107-byte cap.
pub fn make_temp_dir() -> io::Result<PathBuf> {
    // TMPDIR only when it is short and others may enter it: the servers run as another
    // user when connbench runs as root, and a private TMPDIR (mktemp -d makes 0700)
    // would lock them out of their own directory.
    let base = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|p| p.as_os_str().len() <= 40)
        .filter(|p| fs::metadata(p).is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o001 != 0))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let template = std::ffi::CString::new(format!("{}/cb-XXXXXX", base.display()))?;
    let mut bytes = template.into_bytes_with_nul();
    // SAFETY: mkdtemp writes within the NUL-terminated buffer we own.
    let p = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    if p.is_null() {
        return Err(io::Error::last_os_error());
    }
    bytes.pop();
    let dir = PathBuf::from(String::from_utf8(bytes).map_err(io::Error::other)?);
    // The servers' user must be able to enter it; the data directory inside is theirs only.
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}
