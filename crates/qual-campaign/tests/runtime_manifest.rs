//! `runtime-manifest` binds installed bytes, on a real venv: `python3 -m venv`, a tiny local
//! package installed by pip from a directory (an in-tree PEP 517 backend, so nothing is
//! downloaded and no build tool is needed), then captures. Two captures of the unchanged
//! venv are byte-identical; editing the installed module, adding a `sitecustomize.py` (which
//! prints, as a real one may) and adding a `.pth` file each change `runtime_content_sha256`
//! and each is named in the manifest and its findings. Without `python3 -m venv` the trial is
//! reported ignored (failed under `CI=true`).

// The test builds the venv with real programs and edits its files directly.
#![allow(clippy::disallowed_methods)]

use qual_campaign::installed::{Found, UnownedKind};
use qual_campaign::manifest::{self, Manifest};
use qual_test_fixtures::harness::{self, Trial};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BACKEND: &str = r#"import base64, hashlib, os, zipfile
NAME, VER = "kq_tiny", "0.1"
def _h(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{NAME}-{VER}.dist-info"
    files = {
        "kq_tiny/__init__.py": open(os.path.join("kq_tiny", "__init__.py"), "rb").read(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: kq-tiny\nVersion: {VER}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: kq\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{p},{_h(d)},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    name = f"{NAME}-{VER}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for p, d in files.items():
            z.writestr(p, d)
    return name
"#;

const PYPROJECT: &str =
    "[build-system]\nrequires = []\nbuild-backend = \"kq_backend\"\nbackend-path = [\".\"]\n";

fn python_venv() -> Result<(), String> {
    match Command::new("python3")
        .args(["-m", "venv", "--help"])
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("needs python3 with the venv module (Debian python3-venv)".into()),
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("start");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A venv with `kq-tiny 0.1` installed by pip from a local directory; returns its python and
/// site-packages.
fn venv(root: &Path) -> (PathBuf, PathBuf) {
    run(Command::new("python3")
        .args(["-m", "venv"])
        .arg(root.join("venv")));
    let pkg = root.join("pkg");
    std::fs::create_dir_all(pkg.join("kq_tiny")).unwrap();
    std::fs::write(pkg.join("kq_backend.py"), BACKEND).unwrap();
    std::fs::write(pkg.join("pyproject.toml"), PYPROJECT).unwrap();
    std::fs::write(pkg.join("kq_tiny/__init__.py"), "ANSWER = 42\n").unwrap();
    let python = root.join("venv/bin/python");
    run(Command::new(&python)
        .args(["-m", "pip", "install", "--no-index", "--no-build-isolation"])
        .args(["--disable-pip-version-check", "-q"])
        .arg(&pkg)
        .env("PIP_NO_INPUT", "1"));
    let site = std::fs::read_dir(root.join("venv/lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .expect("site-packages");
    (python, site)
}

fn capture(python: &Path) -> (Manifest, Vec<u8>) {
    let env: BTreeMap<String, String> = [("OMP_NUM_THREADS".into(), "1".into())].into();
    manifest::capture(python, &env).expect("two identical captures")
}

/// The findings of `now` that `before` did not have.
fn new_findings(before: &Manifest, now: &Manifest) -> Vec<String> {
    let old = before.findings();
    now.findings()
        .into_iter()
        .filter(|f| !old.contains(f))
        .collect()
}

fn installed_bytes_are_bound() {
    let d = tempfile::tempdir().unwrap();
    let (python, site) = venv(d.path());

    let (m0, b0) = capture(&python);
    let tiny = m0
        .distributions
        .iter()
        .find(|x| x.name == "kq-tiny")
        .expect("kq-tiny captured");
    assert_eq!(tiny.version, "0.1");
    assert!(
        tiny.record_mismatches.is_empty(),
        "{:?}",
        tiny.record_mismatches
    );
    // Every listed file but RECORD itself is either checked against its hash (pip adds
    // INSTALLER, REQUESTED and direct_url.json, hashed) or, listed without one (the compiled
    // file pip writes at install), hashed and listed.
    assert_eq!(tiny.verified_files, 6, "{tiny:?}");
    assert_eq!(tiny.record_files, 8, "{tiny:?}");
    let unhashed: Vec<_> = tiny
        .unhashed_files
        .iter()
        .map(|u| u.path.as_str())
        .collect();
    assert_eq!(unhashed.len(), 1, "{unhashed:?}");
    assert!(
        unhashed[0].starts_with("kq_tiny/__pycache__/__init__."),
        "{unhashed:?}"
    );
    let pip = m0.distributions.iter().find(|x| x.name == "pip").unwrap();
    assert!(pip.verified_files > 100 && pip.record_mismatches.is_empty());
    // Nothing changed: byte-identical.
    let (_, b1) = capture(&python);
    assert_eq!(b0, b1);

    // An edited installed module: named as a RECORD mismatch.
    std::fs::write(site.join("kq_tiny/__init__.py"), "ANSWER = 43\n").unwrap();
    let (m1, _) = capture(&python);
    assert_ne!(m1.runtime_content_sha256, m0.runtime_content_sha256);
    let tiny = m1
        .distributions
        .iter()
        .find(|x| x.name == "kq-tiny")
        .unwrap();
    assert_eq!(
        tiny.record_mismatches.len(),
        1,
        "{:?}",
        tiny.record_mismatches
    );
    assert_eq!(tiny.record_mismatches[0].path, "kq_tiny/__init__.py");
    assert!(matches!(
        tiny.record_mismatches[0].found,
        Found::Differs { bytes: 12, .. }
    ));
    let f = new_findings(&m0, &m1);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].starts_with("kq-tiny 0.1: kq_tiny/__init__.py differs from its RECORD"),
        "{f:?}"
    );

    // An added sitecustomize.py (that prints): listed as unowned, the probe still answers.
    let sc = site.join("sitecustomize.py");
    std::fs::write(&sc, "print('hello from sitecustomize')\n").unwrap();
    let (m2, _) = capture(&python);
    assert_ne!(m2.runtime_content_sha256, m1.runtime_content_sha256);
    let f = new_findings(&m1, &m2);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].starts_with(&format!("{} is a sitecustomize module", sc.display())),
        "{f:?}"
    );
    assert!(m2
        .unowned_files
        .iter()
        .any(|u| u.kind == UnownedKind::Sitecustomize && u.path == sc.display().to_string()));

    // An added .pth file: listed as unowned.
    let pth = site.join("zz-extra.pth");
    std::fs::write(&pth, "import os\n").unwrap();
    let (m3, _) = capture(&python);
    assert_ne!(m3.runtime_content_sha256, m2.runtime_content_sha256);
    let f = new_findings(&m2, &m3);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].starts_with(&format!("{} is a .pth file", pth.display())),
        "{f:?}"
    );

    // The manifest file reads back strictly with the new fields.
    let (_, bytes) = capture(&python);
    let file = d.path().join("m.json");
    std::fs::write(&file, &bytes).unwrap();
    assert_eq!(manifest::read(&file).unwrap(), m3);
}

fn main() {
    harness::run(vec![Trial::new(
        "installed_bytes_are_bound",
        installed_bytes_are_bound,
    )
    .needs(python_venv())]);
}
