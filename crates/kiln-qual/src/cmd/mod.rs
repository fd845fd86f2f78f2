//! One module per subcommand.

pub mod workload;
