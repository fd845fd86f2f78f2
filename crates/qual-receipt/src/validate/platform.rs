//! `receipt.environment`: host, OS, compiler, runtime, device, and the platform evidence of
//! WSL2 and macOS (capabilities that must agree with their observations).

use super::*;

impl Checker {
    /// WSL2 observations: keys, host and GPU temperatures (sources, ranges), each agreeing with
    /// its capability.
    fn wsl2_observations(
        &mut self,
        v: &Value,
        capabilities: Option<&Object>,
        device: Option<&Object>,
    ) {
        let ctx = "receipt.environment.platform.observations";
        let obs = self.exact(v, &WSL2_OBSERVATION_KEYS, ctx);
        let empty = Vec::new();
        let host = match get(obs, "host_temperatures").as_array() {
            Some(a) => a,
            None => {
                self.push(format!("{ctx}.host_temperatures"), "must be an array");
                &empty
            }
        };
        let mut seen: Vec<(String, String)> = Vec::new();
        for (i, raw) in host.iter().enumerate() {
            let ictx = format!("{ctx}.host_temperatures[{i}]");
            let t = self.exact(raw, &HOST_TEMPERATURE_KEYS, &ictx);
            let source = get(t, "source");
            self.one_of(source, &HOST_TEMPERATURE_SOURCES, &format!("{ictx}.source"));
            let name = self.string(get(t, "name"), &format!("{ictx}.name"), false);
            if !name.is_empty() && name.trim().is_empty() {
                self.push(
                    format!("{ictx}.name"),
                    "must contain a non-whitespace character",
                );
            }
            let source_text = match source {
                Value::String(s) => s.clone(),
                Value::Null => "null".to_owned(),
                other => qual_json::to_canonical_string(other),
            };
            let identity = (source_text, name.to_owned());
            if seen.contains(&identity) {
                self.push(
                    format!("{ctx}.host_temperatures"),
                    format!(
                        "contains duplicate source/name ({}, {})",
                        qual_json::show::quote(&identity.0),
                        qual_json::show::quote(&identity.1)
                    ),
                );
            }
            seen.push(identity);
            self.temperature(
                get(t, "temperature_millicelsius"),
                &format!("{ictx}.temperature_millicelsius"),
                -50_000,
                200_000,
            );
        }

        let gpu = get(obs, "gpu_temperature");
        if !gpu.is_null() {
            let gctx = format!("{ctx}.gpu_temperature");
            let g = self.exact(gpu, &GPU_TEMPERATURE_KEYS, &gctx);
            if get(g, "source").as_str() != Some("nvml") {
                self.push(format!("{gctx}.source"), "must be 'nvml'");
            }
            let uuid = self.string(get(g, "device_uuid"), &format!("{gctx}.device_uuid"), false);
            match get(device, "device_uuid")
                .as_str()
                .filter(|s| !s.is_empty())
            {
                None => self.push(&gctx, "requires a selected device UUID"),
                Some(selected) if uuid != selected => {
                    self.push(
                        format!("{gctx}.device_uuid"),
                        "must match the selected device",
                    );
                }
                Some(_) => {}
            }
            self.temperature(
                get(g, "temperature_millicelsius"),
                &format!("{gctx}.temperature_millicelsius"),
                1_000,
                150_000,
            );
        }

        let pctx = "receipt.environment.platform";
        let available = |k: &str| get(capabilities, k).as_str() == Some("available");
        if available("host_temperature") == host.is_empty() {
            self.push(
                pctx,
                "host_temperature capability and observations disagree",
            );
        }
        let gpu_available = available("gpu_temperature");
        if gpu_available == gpu.is_null() {
            self.push(pctx, "gpu_temperature capability and observations disagree");
        }
        if gpu_available && !available("nvml") {
            self.push(pctx, "gpu_temperature requires NVML");
        }
    }

    /// macOS observations: keys, each observation present checked by its own rules, every
    /// capability agreeing with its observation, and no temperature on macOS.
    fn macos_observations(
        &mut self,
        v: &Value,
        capabilities: Option<&Object>,
        device: Option<&Object>,
    ) {
        let ctx = "receipt.environment.platform.observations";
        let obs = self.exact(v, &MACOS_OBSERVATION_KEYS, ctx);

        let hardware_value = get(obs, "hardware_identity");
        if !hardware_value.is_null() {
            self.macos_hardware(hardware_value, ctx, device);
        }

        let metal_value = get(obs, "metal_runtime");
        if !metal_value.is_null() {
            self.macos_metal_runtime(metal_value, ctx, device);
        }

        let fs_value = get(obs, "filesystem");
        if !fs_value.is_null() {
            self.macos_filesystem(fs_value, ctx);
        }

        let unified_value = get(obs, "unified_memory");
        if !unified_value.is_null() {
            self.macos_unified_memory(unified_value, ctx, device);
        }

        let pressure_value = get(obs, "memory_pressure");
        if !pressure_value.is_null() {
            self.macos_memory_pressure(pressure_value, ctx);
        }

        let thermal_value = get(obs, "thermal_pressure");
        if !thermal_value.is_null() {
            self.macos_thermal_pressure(thermal_value, ctx);
        }

        let pctx = "receipt.environment.platform";
        for (capability, observation) in [
            ("apple_hardware_identity", hardware_value),
            ("metal_runtime_identity", metal_value),
            ("filesystem_semantics", fs_value),
            ("unified_memory_accounting", unified_value),
            ("memory_pressure", pressure_value),
            ("thermal_pressure", thermal_value),
        ] {
            let available = get(capabilities, capability).as_str() == Some("available");
            if available == observation.is_null() {
                self.push(
                    pctx,
                    format!("{capability} capability and observations disagree"),
                );
            }
        }
        for temperature in ["host_temperature", "gpu_temperature"] {
            if !get(obs, temperature).is_null() {
                self.push(format!("{ctx}.{temperature}"), "must be null on macOS");
            }
            if get(capabilities, temperature).as_str() != Some("unavailable") {
                self.push(
                    pctx,
                    format!("{temperature} must be unavailable when its observation is null"),
                );
            }
        }
    }

    /// `hardware_identity`: its keys and strings, positive core and memory counts, each matching
    /// the selected device.
    fn macos_hardware(&mut self, v: &Value, ctx: &str, device: Option<&Object>) {
        let hctx = format!("{ctx}.hardware_identity");
        let h = self.exact(v, &MACOS_HARDWARE_KEYS, &hctx);
        for key in [
            "machine_name",
            "machine_model",
            "chip_type",
            "cpu_brand",
            "kernel_build",
        ] {
            self.string(get(h, key), &format!("{hctx}.{key}"), false);
        }
        self.positive_int(get(h, "gpu_core_count"), &format!("{hctx}.gpu_core_count"));
        self.positive_int(
            get(h, "physical_memory_bytes"),
            &format!("{hctx}.physical_memory_bytes"),
        );
        for (key, device_key) in [
            ("chip_type", "name"),
            ("gpu_core_count", "compute_units"),
            ("physical_memory_bytes", "memory_bytes"),
        ] {
            if !py_eq(get(h, key), get(device, device_key)) {
                self.push(format!("{hctx}.{key}"), "must match the selected device");
            }
        }
    }

    /// `metal_runtime`: its keys, name (matching the device), unified memory, positive buffer
    /// limits, non-negative allocation.
    fn macos_metal_runtime(&mut self, v: &Value, ctx: &str, device: Option<&Object>) {
        let mctx = format!("{ctx}.metal_runtime");
        let m = self.exact(v, &MACOS_METAL_RUNTIME_KEYS, &mctx);
        self.string(get(m, "name"), &format!("{mctx}.name"), false);
        let unified = self.boolean(
            get(m, "has_unified_memory"),
            &format!("{mctx}.has_unified_memory"),
        );
        if unified != Some(true) {
            self.push(format!("{mctx}.has_unified_memory"), "must be true");
        }
        for key in [
            "max_buffer_length_bytes",
            "recommended_max_working_set_bytes",
        ] {
            self.positive_int(get(m, key), &format!("{mctx}.{key}"));
        }
        self.nonnegative_number(
            get(m, "current_allocated_bytes"),
            &format!("{mctx}.current_allocated_bytes"),
        );
        if !py_eq(get(m, "name"), get(device, "name")) {
            self.push(format!("{mctx}.name"), "must match the selected device");
        }
    }

    /// `filesystem`: its keys and strings, the semantics that must hold (atomic replace, full
    /// sync, directory fsync, hard and symbolic links), case sensitivity.
    fn macos_filesystem(&mut self, v: &Value, ctx: &str) {
        let fctx = format!("{ctx}.filesystem");
        let f = self.exact(v, &MACOS_FILESYSTEM_KEYS, &fctx);
        for key in ["root", "source", "fstype", "mount_point"] {
            self.string(get(f, key), &format!("{fctx}.{key}"), false);
        }
        for key in [
            "atomic_replace",
            "full_file_sync",
            "directory_fsync",
            "hardlink",
            "symlink",
        ] {
            let path = format!("{fctx}.{key}");
            if self.boolean(get(f, key), &path) != Some(true) {
                self.push(path, "must be true");
            }
        }
        self.boolean(get(f, "case_sensitive"), &format!("{fctx}.case_sensitive"));
    }

    /// `unified_memory`: its keys, the total (matching the device), swap totals, swap in use
    /// within the total.
    fn macos_unified_memory(&mut self, v: &Value, ctx: &str, device: Option<&Object>) {
        let uctx = format!("{ctx}.unified_memory");
        let u = self.exact(v, &MACOS_UNIFIED_MEMORY_KEYS, &uctx);
        self.positive_int(get(u, "total_bytes"), &format!("{uctx}.total_bytes"));
        for key in ["swap_total_bytes", "swap_used_bytes"] {
            if !Self::nonnegative_int(get(u, key)) {
                self.push(format!("{uctx}.{key}"), "must be a non-negative integer");
            }
        }
        self.boolean(get(u, "swap_encrypted"), &format!("{uctx}.swap_encrypted"));
        if !py_eq(get(u, "total_bytes"), get(device, "memory_bytes")) {
            self.push(
                format!("{uctx}.total_bytes"),
                "must match the selected device",
            );
        }
        if let (Some(total), Some(used)) = (
            py_int(get(u, "swap_total_bytes")),
            py_int(get(u, "swap_used_bytes")),
        ) {
            if cmp_int(&used, &total) == Ordering::Greater {
                self.push(
                    format!("{uctx}.swap_used_bytes"),
                    "exceeds swap_total_bytes",
                );
            }
        }
    }

    /// `memory_pressure`: every counter a non-negative integer (a percentage up to 100, a
    /// positive page size).
    fn macos_memory_pressure(&mut self, v: &Value, ctx: &str) {
        let pctx = format!("{ctx}.memory_pressure");
        let p = self.exact(v, &MACOS_MEMORY_PRESSURE_KEYS, &pctx);
        for key in MACOS_MEMORY_PRESSURE_KEYS {
            let v = get(p, key);
            let ok = strict_int(v).is_some_and(|i| {
                !i.is_negative()
                    && (key != "free_percent" || i.as_i64().is_some_and(|x| x <= 100))
                    && (key != "page_size_bytes" || int_sign(i) == Ordering::Greater)
            });
            if !ok {
                let bound = if key == "free_percent" {
                    " from 0 through 100"
                } else {
                    ""
                };
                self.push(
                    format!("{pctx}.{key}"),
                    format!("must be an integer{bound}"),
                );
            }
        }
    }

    /// `thermal_pressure`: its keys, each a non-empty string.
    fn macos_thermal_pressure(&mut self, v: &Value, ctx: &str) {
        let tctx = format!("{ctx}.thermal_pressure");
        let t = self.exact(v, &MACOS_THERMAL_PRESSURE_KEYS, &tctx);
        for key in MACOS_THERMAL_PRESSURE_KEYS {
            self.string(get(t, key), &format!("{tctx}.{key}"), false);
        }
    }

    /// `receipt.environment`: keys, host id, OS, compiler, runtime, device, platform kind and
    /// capabilities, then the platform's observations.
    pub(super) fn environment(&mut self, v: &Value) {
        let env = self.keys(
            v,
            &ENVIRONMENT_REQUIRED_KEYS,
            &ENVIRONMENT_KEYS,
            "receipt.environment",
        );
        let host_id = self.string(get(env, "host_id"), "receipt.environment.host_id", false);
        if !host_id.is_empty() && !is_host_id(host_id) {
            self.push("receipt.environment.host_id", "has invalid syntax");
        }
        let os = self.exact(get(env, "os"), &OS_KEYS, "receipt.environment.os");
        for key in ["name", "version", "kernel", "architecture"] {
            self.string(
                get(os, key),
                &format!("receipt.environment.os.{key}"),
                false,
            );
        }
        let dctx = "receipt.environment.device";
        let device = self.keys(
            get(env, "device"),
            &DEVICE_REQUIRED_KEYS,
            &DEVICE_KEYS,
            dctx,
        );
        for key in ["name", "architecture", "driver"] {
            self.string(get(device, key), &format!("{dctx}.{key}"), false);
        }
        let memory_bytes = get(device, "memory_bytes");
        if !memory_bytes.is_null() {
            self.positive_int(memory_bytes, &format!("{dctx}.memory_bytes"));
        }
        self.boolean(
            get(device, "unified_memory"),
            &format!("{dctx}.unified_memory"),
        );
        let logical_index = get(device, "logical_index");
        if !logical_index.is_null() && !Self::nonnegative_int(logical_index) {
            self.push(
                format!("{dctx}.logical_index"),
                "must be a non-negative integer or null",
            );
        }
        for key in ["device_uuid", "pci_bus_id", "compute_capability"] {
            let value = get(device, key);
            if !value.is_null() {
                self.string(value, &format!("{dctx}.{key}"), false);
            }
        }
        let compute_units = get(device, "compute_units");
        if !compute_units.is_null() {
            self.positive_int(compute_units, &format!("{dctx}.compute_units"));
        }
        let available = get(device, "memory_available_bytes");
        if !available.is_null() {
            if !Self::nonnegative_int(available) {
                self.push(
                    format!("{dctx}.memory_available_bytes"),
                    "must be a non-negative integer or null",
                );
            } else if let (Some(a), Some(total)) = (strict_int(available), py_int(memory_bytes)) {
                if cmp_int(a, &total) == Ordering::Greater {
                    self.push(
                        format!("{dctx}.memory_available_bytes"),
                        "exceeds memory_bytes",
                    );
                }
            }
        }
        self.string_map(get(env, "runtime"), "receipt.environment.runtime");
        self.string_map(get(env, "compiler"), "receipt.environment.compiler");
        if let Some(platform_value) = env.and_then(|e| e.get("platform")) {
            let pctx = "receipt.environment.platform";
            let platform = self.exact(platform_value, &PLATFORM_KEYS, pctx);
            let kind = get(platform, "kind").as_str();
            if !matches!(kind, Some("wsl2" | "macos")) {
                self.push(format!("{pctx}.kind"), "must be 'wsl2' or 'macos'");
            }
            let macos = kind == Some("macos");
            let capability_keys: &[&str] = if macos {
                &MACOS_CAPABILITY_KEYS
            } else {
                &WSL2_CAPABILITY_KEYS
            };
            let capabilities = self.exact(
                get(platform, "capabilities"),
                capability_keys,
                &format!("{pctx}.capabilities"),
            );
            if let Some(caps) = capabilities {
                for (key, status) in caps.iter() {
                    if !status
                        .as_str()
                        .is_some_and(|s| CAPABILITY_STATUSES.contains(&s))
                    {
                        self.push(
                            format!("{pctx}.capabilities.{key}"),
                            format!(
                                "must be one of {}",
                                qual_json::show::list(&CAPABILITY_STATUSES)
                            ),
                        );
                    }
                }
            }
            self.string_map(get(platform, "details"), &format!("{pctx}.details"));
            let observations = get(platform, "observations");
            if macos {
                self.macos_observations(observations, capabilities, device);
            } else {
                self.wsl2_observations(observations, capabilities, device);
            }
        }
    }
}
