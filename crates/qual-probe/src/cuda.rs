//! Which NVIDIA GPU a run's cases use, among those `nvidia-smi` lists.
//!
//! `nvidia-smi` lists every GPU of the host in PCI bus order and ignores the variables that
//! choose a CUDA program's devices; a case's CUDA runtime numbers the GPUs it may see by
//! `CUDA_DEVICE_ORDER` (`FASTEST_FIRST` unless set, or `PCI_BUS_ID`) after keeping only those
//! `CUDA_VISIBLE_DEVICES` names (indices into that order, or `GPU-<UUID>` prefixes; the list
//! ends at its first unusable entry), and an unqualified program runs on its device 0. The
//! closed case environment inherits neither variable from the host, so only a case's own
//! `environment` sets them ([`CudaVisibility`]).
//!
//! [`select`] names the GPU that is device 0 for the cases, or why that cannot be known from
//! what `nvidia-smi` reports: a host with GPUs of different models under the default
//! `FASTEST_FIRST` order (CUDA ranks them by a speed `nvidia-smi` does not report), an index
//! past the last GPU, a UUID prefix that matches none or several, a MIG instance (the query
//! reports whole GPUs, not instances), an empty list (no GPU at all). Ties among GPUs of one
//! model keep PCI bus order, so on a host of identical GPUs both orders agree.

use crate::backend::Device;
use qual_json::show::quote;

/// The two variables the cases' CUDA runtime reads, as the cases see them (`None`: unset).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CudaVisibility {
    /// `CUDA_VISIBLE_DEVICES`.
    pub visible_devices: Option<String>,
    /// `CUDA_DEVICE_ORDER`.
    pub device_order: Option<String>,
}

/// The GPU the cases use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selected {
    /// Its position in the `nvidia-smi` listing.
    pub position: usize,
    /// How it was chosen, for the receipt's `runtime.cuda_device_selection`.
    pub description: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    FastestFirst,
    PciBusId,
}

fn order(v: &CudaVisibility) -> Result<Order, String> {
    match v.device_order.as_deref() {
        None | Some("FASTEST_FIRST") => Ok(Order::FastestFirst),
        Some("PCI_BUS_ID") => Ok(Order::PciBusId),
        Some(other) => Err(format!(
            "CUDA_DEVICE_ORDER is {}, neither FASTEST_FIRST nor PCI_BUS_ID",
            quote(other)
        )),
    }
}

/// The listing positions in the order the cases' CUDA runtime numbers them, or why that order
/// cannot be known.
fn cuda_order(devs: &[Device], order: Order) -> Result<Vec<usize>, String> {
    let mut by_bus: Vec<usize> = (0..devs.len()).collect();
    by_bus.sort_by(|&a, &b| bus_key(&devs[a]).cmp(&bus_key(&devs[b])));
    let model = |d: &Device| (d.name.clone(), d.compute_capability.clone());
    let first = model(&devs[by_bus[0]]);
    if order == Order::FastestFirst && by_bus.iter().any(|&i| model(&devs[i]) != first) {
        let mut names: Vec<String> = devs.iter().map(|d| d.name.clone()).collect();
        names.dedup();
        return Err(format!(
            "the host has {} GPUs of different models ({}): under CUDA's default FASTEST_FIRST \
             order the cases' device 0 is the one CUDA ranks fastest, which nvidia-smi does not \
             report; set CUDA_DEVICE_ORDER=PCI_BUS_ID or CUDA_VISIBLE_DEVICES=<GPU UUID> in \
             the cases' environment",
            devs.len(),
            names.join(", ")
        ));
    }
    Ok(by_bus)
}

fn bus_key(d: &Device) -> String {
    d.pci_bus_id.as_deref().unwrap_or("").to_ascii_lowercase()
}

fn uuid_of(d: &Device) -> &str {
    d.device_uuid.as_deref().unwrap_or("")
}

/// The GPU among `devs` (the `nvidia-smi` listing, at least one) that is device 0 for cases
/// with visibility `v`, or why it cannot be known (see the module docs).
pub fn select(devs: &[Device], v: &CudaVisibility) -> Result<Selected, String> {
    if devs.is_empty() {
        return Err("nvidia-smi listed no GPU".into());
    }
    let order = order(v)?;
    let order_text = match order {
        Order::FastestFirst => "FASTEST_FIRST",
        Order::PciBusId => "PCI_BUS_ID",
    };
    let (position, why) = match v.visible_devices.as_deref() {
        None => {
            let position = cuda_order(devs, order)?[0];
            (
                position,
                format!("CUDA_VISIBLE_DEVICES unset, {order_text} order"),
            )
        }
        Some(list) => {
            let entry = list.split(',').next().unwrap_or("").trim();
            let position = visible_entry(devs, order, entry)?;
            let how = if entry.starts_with("GPU-") {
                "by UUID".to_string()
            } else {
                format!("by index in {order_text} order")
            };
            (
                position,
                format!("first entry of CUDA_VISIBLE_DEVICES={}, {how}", quote(list)),
            )
        }
    };
    let d = &devs[position];
    let index = d
        .logical_index
        .map(|i| i.to_string())
        .unwrap_or_else(|| "?".into());
    Ok(Selected {
        position,
        description: format!(
            "nvidia-smi GPU {index} ({}) of {} listed is the cases' CUDA device 0: {why}",
            uuid_of(d),
            devs.len()
        ),
    })
}

/// The listing position that a `CUDA_VISIBLE_DEVICES` entry names.
fn visible_entry(devs: &[Device], order: Order, entry: &str) -> Result<usize, String> {
    if entry.is_empty() {
        return Err("CUDA_VISIBLE_DEVICES starts with an empty entry: the cases see no GPU".into());
    }
    if entry.starts_with("MIG-") {
        return Err(format!(
            "CUDA_VISIBLE_DEVICES names the MIG instance {}: nvidia-smi --query-gpu reports \
             whole GPUs, not instances, so the probe cannot record it; qualify on a whole GPU",
            quote(entry)
        ));
    }
    if entry.starts_with("GPU-") {
        let want = entry.to_ascii_lowercase();
        let hits: Vec<usize> = (0..devs.len())
            .filter(|&i| uuid_of(&devs[i]).to_ascii_lowercase().starts_with(&want))
            .collect();
        return match hits.as_slice() {
            [one] => Ok(*one),
            [] => Err(format!(
                "CUDA_VISIBLE_DEVICES names {}, which is no GPU's UUID (nvidia-smi lists {})",
                quote(entry),
                devs.iter().map(uuid_of).collect::<Vec<_>>().join(", ")
            )),
            many => Err(format!(
                "CUDA_VISIBLE_DEVICES names {}, a prefix of {} GPUs' UUIDs: give more of it",
                quote(entry),
                many.len()
            )),
        };
    }
    let Ok(n) = entry.parse::<usize>() else {
        return Err(format!(
            "CUDA_VISIBLE_DEVICES starts with {}, neither an index nor a GPU-<UUID>: the \
             cases see no GPU",
            quote(entry)
        ));
    };
    let ordered = cuda_order(devs, order)?;
    ordered.get(n).copied().ok_or_else(|| {
        format!(
            "CUDA_VISIBLE_DEVICES starts with index {n}, but nvidia-smi lists {} GPU(s): the \
             cases see no GPU",
            devs.len()
        )
    })
}

/// The visibility that every case of a run shares, from each case's id and visibility; cases
/// that disagree use different GPUs, which one receipt's `environment.device` cannot record.
pub fn shared_visibility(cases: &[(String, CudaVisibility)]) -> Result<CudaVisibility, String> {
    let Some((first_id, first)) = cases.first() else {
        return Ok(CudaVisibility::default());
    };
    match cases.iter().find(|(_, v)| v != first) {
        None => Ok(first.clone()),
        Some((id, v)) => Err(format!(
            "cases {} and {} choose their GPU differently ({} and {}): one receipt records \
             one device, so give every case of the variant the same CUDA_VISIBLE_DEVICES and \
             CUDA_DEVICE_ORDER",
            quote(first_id),
            quote(id),
            show(first),
            show(v)
        )),
    }
}

fn show(v: &CudaVisibility) -> String {
    let one = |name: &str, x: &Option<String>| match x {
        Some(x) => format!("{name}={}", quote(x)),
        None => format!("{name} unset"),
    };
    format!(
        "{}, {}",
        one("CUDA_VISIBLE_DEVICES", &v.visible_devices),
        one("CUDA_DEVICE_ORDER", &v.device_order)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u64, name: &str, cc: &str, uuid: &str, bus: &str) -> Device {
        Device {
            name: name.into(),
            architecture: format!("sm_{}", cc.replace('.', "")),
            memory_bytes: Some(1 << 34),
            unified_memory: false,
            driver: "NVIDIA 580.95.05".into(),
            logical_index: Some(index),
            device_uuid: Some(uuid.into()),
            pci_bus_id: Some(bus.into()),
            compute_capability: Some(cc.into()),
            compute_units: None,
            memory_available_bytes: Some(1 << 33),
        }
    }

    fn alike() -> Vec<Device> {
        vec![
            gpu(0, "NVIDIA H200", "9.0", "GPU-aaaa1111", "00000000:19:00.0"),
            gpu(1, "NVIDIA H200", "9.0", "GPU-bbbb2222", "00000000:3B:00.0"),
            gpu(2, "NVIDIA H200", "9.0", "GPU-bbbb3333", "00000000:4C:00.0"),
        ]
    }

    fn mixed() -> Vec<Device> {
        vec![
            gpu(
                0,
                "NVIDIA GeForce RTX 3060",
                "8.6",
                "GPU-cccc",
                "00000000:01:00.0",
            ),
            gpu(
                1,
                "NVIDIA GeForce RTX 4090",
                "8.9",
                "GPU-dddd",
                "00000000:02:00.0",
            ),
        ]
    }

    fn vis(visible: Option<&str>, order: Option<&str>) -> CudaVisibility {
        CudaVisibility {
            visible_devices: visible.map(str::to_string),
            device_order: order.map(str::to_string),
        }
    }

    fn pick(devs: &[Device], v: &CudaVisibility) -> Result<usize, String> {
        select(devs, v).map(|s| s.position)
    }

    #[test]
    fn unset_is_the_first_gpu_of_identical_ones_and_says_so() {
        let s = select(&alike(), &CudaVisibility::default()).unwrap();
        assert_eq!(s.position, 0);
        assert_eq!(
            s.description,
            "nvidia-smi GPU 0 (GPU-aaaa1111) of 3 listed is the cases' CUDA device 0: \
             CUDA_VISIBLE_DEVICES unset, FASTEST_FIRST order"
        );
    }

    #[test]
    fn indices_and_uuids_pick_the_named_gpu() {
        assert_eq!(pick(&alike(), &vis(Some("2,0"), None)), Ok(2));
        assert_eq!(pick(&alike(), &vis(Some(" 1 "), None)), Ok(1));
        assert_eq!(pick(&alike(), &vis(Some("GPU-BBBB3"), None)), Ok(2));
        let s = select(&alike(), &vis(Some("GPU-aaaa1111"), None)).unwrap();
        assert!(
            s.description
                .ends_with("first entry of CUDA_VISIBLE_DEVICES=\"GPU-aaaa1111\", by UUID"),
            "{}",
            s.description
        );
    }

    #[test]
    fn pci_order_follows_the_bus_not_the_listing() {
        let mut devs = alike();
        devs.swap(0, 2);
        assert_eq!(pick(&devs, &vis(None, Some("PCI_BUS_ID"))), Ok(2));
        assert_eq!(pick(&devs, &vis(Some("1"), Some("PCI_BUS_ID"))), Ok(1));
    }

    #[test]
    fn mixed_models_need_an_order_or_a_uuid() {
        let e = pick(&mixed(), &CudaVisibility::default()).unwrap_err();
        assert!(e.contains("2 GPUs of different models"), "{e}");
        assert!(e.contains("CUDA_DEVICE_ORDER=PCI_BUS_ID"), "{e}");
        assert!(pick(&mixed(), &vis(Some("0"), None)).is_err());
        assert_eq!(pick(&mixed(), &vis(None, Some("PCI_BUS_ID"))), Ok(0));
        assert_eq!(pick(&mixed(), &vis(Some("GPU-dddd"), None)), Ok(1));
    }

    #[test]
    fn unusable_selections_are_named() {
        let cases = [
            (vis(Some(""), None), "empty entry"),
            (vis(Some(",1"), None), "empty entry"),
            (
                vis(Some("7"), None),
                "index 7, but nvidia-smi lists 3 GPU(s)",
            ),
            (vis(Some("GPU-ffff"), None), "which is no GPU's UUID"),
            (vis(Some("GPU-bbbb"), None), "a prefix of 2 GPUs' UUIDs"),
            (vis(Some("MIG-1234"), None), "MIG instance"),
            (vis(Some("-1"), None), "neither an index nor a GPU-<UUID>"),
            (
                vis(None, Some("SLOWEST")),
                "neither FASTEST_FIRST nor PCI_BUS_ID",
            ),
        ];
        for (v, want) in cases {
            let e = pick(&alike(), &v).unwrap_err();
            assert!(e.contains(want), "{v:?}: {e}");
        }
        assert!(pick(&[], &CudaVisibility::default()).is_err());
    }

    #[test]
    fn cases_must_agree_on_their_gpu() {
        let a = vis(Some("1"), None);
        let same = [("a".to_string(), a.clone()), ("b".to_string(), a.clone())];
        assert_eq!(shared_visibility(&same), Ok(a.clone()));
        assert_eq!(shared_visibility(&[]), Ok(CudaVisibility::default()));
        let e = shared_visibility(&[
            ("a".to_string(), a),
            ("b".to_string(), CudaVisibility::default()),
        ])
        .unwrap_err();
        assert!(
            e.starts_with(
                "cases \"a\" and \"b\" choose their GPU differently \
                 (CUDA_VISIBLE_DEVICES=\"1\", CUDA_DEVICE_ORDER unset and \
                 CUDA_VISIBLE_DEVICES unset, CUDA_DEVICE_ORDER unset)"
            ),
            "{e}"
        );
    }
}
