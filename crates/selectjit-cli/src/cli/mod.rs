//! Command-line interface. Every failure prints one `error: ...` line on stderr and exits 2.

mod aot;
mod bench;
mod explain;
mod info;
mod run;

use clap::{Parser, Subcommand, ValueEnum};
use selectjit::{Backend, Broadcast, Engine, EngineConfig, Error, Result, Tier};

#[derive(Parser)]
#[command(
    name = "selectjit",
    version,
    about = "JIT-compiled tensor Select / Where"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// out = cond ? then : else on .npy files.
    Run(run::Args),
    /// Benchmark the JIT against the static kernels and a memory copy of the same traffic.
    Bench(bench::Args),
    /// Show the shape, plan, signature, Cranelift IR and machine code of one call.
    Explain(explain::Args),
    /// Version, host ISA as the JIT sees it, build profile, settings.
    Info,
    /// Export kernels ahead of time for a target: an object file with a kernel table, and a C
    /// header (for hosts that forbid generating code at run time).
    Aot(aot::Args),
}

/// Broadcast mode names on the command line.
#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Numpy,
    TwoStep,
    None,
    Pdpd,
}

impl Mode {
    fn with_axis(self, axis: i64) -> Broadcast {
        match self {
            Mode::Numpy => Broadcast::Numpy,
            Mode::TwoStep => Broadcast::TwoStep,
            Mode::None => Broadcast::Exact,
            Mode::Pdpd => Broadcast::Pdpd { axis },
        }
    }
}

/// Backend names on the command line.
#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Jit,
    Static,
    Interp,
}

impl From<BackendArg> for Backend {
    fn from(b: BackendArg) -> Backend {
        match b {
            BackendArg::Jit => Backend::Jit,
            BackendArg::Static => Backend::Static,
            BackendArg::Interp => Backend::Interp,
        }
    }
}

/// Code-generation tier names on the command line.
#[derive(Clone, Copy, ValueEnum)]
enum TierArg {
    Auto,
    Cranelift,
    Avx2,
    Avx512,
}

impl From<TierArg> for Tier {
    fn from(t: TierArg) -> Tier {
        match t {
            TierArg::Auto => Tier::Auto,
            TierArg::Cranelift => Tier::Cranelift,
            TierArg::Avx2 => Tier::Avx2,
            TierArg::Avx512 => Tier::Avx512,
        }
    }
}

/// The options that choose how kernels are made, shared by the commands that run them.
#[derive(clap::Args, Clone, Copy)]
struct CodegenArgs {
    /// Code generator for the JIT backend (default: SELECTJIT_TIER, else auto: the best the
    /// host runs). A tier the host cannot run is an error.
    #[arg(long, value_enum)]
    tier: Option<TierArg>,
    /// Run x86-tier kernels the host cannot execute in the emulator (slow; for verifying
    /// AVX-512 code on a machine without it).
    #[arg(long)]
    emulate: bool,
}

impl CodegenArgs {
    /// The engine configuration these options ask for.
    /// The settings of the environment (`SELECTJIT_*`) apply, the options over them.
    fn config(self, backend: Backend) -> Result<EngineConfig> {
        let mut c = EngineConfig::from_env()?.backend(backend);
        if let Some(t) = self.tier {
            c = c.tier(t.into());
        }
        Ok(c.runner(self.emulate.then(selectjit_emu::Emulator::runner)))
    }

    /// An engine for `backend` with these options, or why it cannot be built.
    fn engine(self, backend: Backend) -> Result<Engine> {
        Engine::with_config(self.config(backend)?)
    }
}

/// Parses the arguments and runs the command; returns the exit status.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                print!("{e}");
                return 0;
            }
            // One line: clap's message (which starts with "error:") up to its usage section.
            let text = e.to_string();
            let msg: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            eprintln!("{}", msg.join(" "));
            return 2;
        }
    };
    let r = match cli.cmd {
        Cmd::Run(a) => run::run(a),
        Cmd::Bench(a) => bench::run(a),
        Cmd::Explain(a) => explain::run(a),
        Cmd::Info => info::run(&mut std::io::stdout()),
        Cmd::Aot(a) => aot::run(a),
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            2
        }
    }
}

fn one_line(e: &Error) -> String {
    e.to_string().replace('\n', " ")
}
