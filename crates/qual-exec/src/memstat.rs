//! Memory of a process tree, read from `/proc` (the CPU stand-in for device memory).
//!
//! Owns: the descendants of a process (by parent pid, from one `/proc` snapshot) and the sum
//! of their proportional set sizes (`Pss` in `/proc/<pid>/smaps_rollup`, in bytes). PSS
//! divides shared pages among the processes that map them, so summing it over a tree counts
//! each page once for the tree (pages shared with processes outside the tree are counted in
//! proportion). A process that exits between the snapshot and the read is left out; a tree
//! whose root cannot be read is an error, never a zero.

/// `pid` and every live descendant (zombies excluded), root first.
pub fn process_tree(pid: u32) -> Vec<u32> {
    let all = crate::procfs::snapshot();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        for s in &all {
            if s.ppid == parent && !s.is_dead() && !out.contains(&s.pid) {
                out.push(s.pid);
            }
        }
        i += 1;
    }
    out
}

/// Parses the `Pss:` line of `smaps_rollup` text, in bytes.
pub fn parse_pss(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("Pss:")?;
        let kb = rest.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
        kb.checked_mul(1024)
    })
}

/// Why a tree's memory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MemstatError {
    /// The root process's `smaps_rollup` could not be read or parsed.
    #[error("read /proc/{pid}/smaps_rollup: {reason}")]
    Root {
        /// The root pid.
        pid: u32,
        /// What went wrong.
        reason: String,
    },
}

/// Summed PSS of `pid` and its descendants, in bytes, and how many processes were counted.
pub fn tree_pss_bytes(pid: u32) -> Result<(u64, usize), MemstatError> {
    let mut total = 0u64;
    let mut counted = 0usize;
    for (i, p) in process_tree(pid).into_iter().enumerate() {
        match crate::procfs::read_system_file(format!("/proc/{p}/smaps_rollup")) {
            Ok(t) => match parse_pss(&t) {
                Some(b) => {
                    total = total.saturating_add(b);
                    counted += 1;
                }
                None if i == 0 => {
                    return Err(MemstatError::Root {
                        pid,
                        reason: "no Pss line".into(),
                    })
                }
                None => {}
            },
            Err(e) if i == 0 => {
                return Err(MemstatError::Root {
                    pid,
                    reason: e.to_string(),
                })
            }
            Err(_) => {}
        }
    }
    Ok((total, counted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pss_line_is_read_in_bytes() {
        let t = "55d0-7ffe ---p 00000000 00:00 0 [rollup]\nRss:  2048 kB\nPss:  1536 kB\nPss_Anon: 100 kB\n";
        assert_eq!(parse_pss(t), Some(1536 * 1024));
        assert_eq!(parse_pss("Rss: 1 kB\n"), None);
    }

    #[test]
    fn own_tree_has_memory() {
        let (bytes, n) = tree_pss_bytes(std::process::id()).unwrap();
        assert!(bytes > 0 && n >= 1);
        assert!(tree_pss_bytes(u32::MAX - 7).is_err());
    }
}
