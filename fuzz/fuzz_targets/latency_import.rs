//! `latency import`'s zip extraction: zips generated from the input (member names, sizes,
//! compression, directories, then a mutation of the archive bytes) extract or are refused
//! without panicking, never write outside the extraction directory, and never exceed the
//! byte limit, whatever members the caller selects.
#![no_main]
use libfuzzer_sys::fuzz_target;
use qual_latency::import::{extract_zip, ImportLimits, Take};
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = Vec::new();
    {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(&mut bytes));
        for (i, chunk) in rest.chunks(24).take(16).enumerate() {
            let (name_len, body) = chunk.split_at((chunk[0] as usize % 12).min(chunk.len()));
            let name = String::from_utf8_lossy(name_len).replace('\0', "");
            let name = if name.is_empty() { format!("m{i}") } else { name };
            let method = if chunk[0] & 0x80 != 0 {
                zip::CompressionMethod::Deflated
            } else {
                zip::CompressionMethod::Stored
            };
            let opts = zip::write::SimpleFileOptions::default().compression_method(method);
            if chunk[0] & 0x40 != 0 {
                let _ = w.add_directory(name, opts);
            } else if w.start_file(name, opts).is_ok() {
                let repeat = 1 + (ctl as usize % 8) * 512;
                for _ in 0..repeat {
                    let _ = w.write_all(body);
                }
            }
        }
        let _ = w.finish();
    }
    // Corrupt one byte somewhere (sizes, names, offsets) when asked to.
    if ctl & 1 == 1 && !bytes.is_empty() {
        let at = (ctl as usize * 7919) % bytes.len();
        bytes[at] ^= rest.first().copied().unwrap_or(0xff);
    }
    let Ok(dir) = tempfile::tempdir() else { return };
    let zip_path = dir.path().join("bundle.zip");
    let out = dir.path().join("out");
    if std::fs::write(&zip_path, &bytes).is_err() || std::fs::create_dir(&out).is_err() {
        return;
    }
    let limits = ImportLimits {
        entries: 8,
        bytes: 64 * 1024,
    };
    // Every member, or a name-dependent selection (skipped, capped, whole).
    let take = |name: &str| match (ctl & 2, name.len() % 3) {
        (0, _) => Take::Whole,
        (_, 0) => Take::Skip,
        (_, 1) => Take::UpTo(1024),
        _ => Take::Whole,
    };
    let _ = extract_zip(&zip_path, &out, &limits, &take);
    // Nothing outside `out` but the zip itself; nothing beyond the limit inside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(names.len() <= 2, "{names:?}");
    fn total(p: &std::path::Path) -> u64 {
        std::fs::read_dir(p).map_or(0, |rd| {
            rd.flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => total(&e.path()),
                    _ => e.metadata().map_or(0, |m| m.len()),
                })
                .sum()
        })
    }
    assert!(total(&out) <= limits.bytes);
});
