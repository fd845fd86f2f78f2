//! Progress bars: the one home of the CLI's progress display, used by `run` (case
//! executions), `serve` and `bench` (requests) and `campaign` (rows).
//!
//! A bar is drawn on stderr only when stderr is a terminal and `-q` was not given; otherwise
//! [`Bar`] is inert and nothing at all is written (a pipe or a log file sees the same bytes
//! as before). The libraries only report progress through their observer traits
//! (`qual_serve::load::ProgressSink`, `qual_runner::RunProgress`,
//! `qual_campaign::progress::CampaignProgress`); this module is the only one that draws.
//! Ids in a bar's message are escaped like every other untrusted text.
//! The bar is cleared before the command prints its summary ([`Bar::finish`]).

use crate::output::esc;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

/// A progress bar on stderr, or nothing.
pub struct Bar {
    bar: Option<ProgressBar>,
    /// Request bars: (elapsed at the last rate sample, output tokens then, tokens/s).
    rate: Mutex<(Duration, u64, f64)>,
}

/// Whether progress is drawn: stderr is a terminal and `-q` was not given.
pub fn shown() -> bool {
    !crate::output::quiet() && std::io::stderr().is_terminal()
}

impl Bar {
    fn with_template(template: &str) -> Bar {
        let bar = shown().then(|| {
            let pb = ProgressBar::new(0);
            if let Ok(style) = ProgressStyle::with_template(template) {
                pb.set_style(style.progress_chars("=> "));
            }
            // Until the first step: preflight, server start-up, the model list.
            pb.set_message("starting");
            // The spinner and the clock move while one long step runs.
            pb.enable_steady_tick(Duration::from_millis(200));
            pb
        });
        Bar {
            bar,
            rate: Mutex::new((Duration::ZERO, 0, 0.0)),
        }
    }

    /// A bar counting requests (`serve`, `bench`): done/total, errors, output tokens/s.
    pub fn requests() -> Bar {
        Bar::with_template("{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} requests · {msg}")
    }

    /// A bar counting steps of `unit` (`cases`, `rows`), with the current one as message.
    pub fn steps(unit: &str) -> Bar {
        Bar::with_template(&format!(
            "{{spinner}} {{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {unit} · {{msg}}"
        ))
    }

    /// Whether this bar draws anything.
    pub fn is_shown(&self) -> bool {
        self.bar.is_some()
    }

    fn set(&self, done: u64, total: u64, msg: String) {
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.set_position(done);
            b.set_message(msg);
        }
    }

    /// Clears the bar (before a summary is printed); idempotent.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.finish();
    }
}

impl qual_serve::load::ProgressSink for Bar {
    fn update(&self, p: qual_serve::load::Progress) {
        if self.bar.is_none() {
            return;
        }
        let mut last = self.rate.lock().unwrap_or_else(|e| e.into_inner());
        // A new run of the load engine (the next bench point) starts its clock again.
        if p.elapsed < last.0 {
            *last = (Duration::ZERO, 0, 0.0);
        }
        let dt = p.elapsed.saturating_sub(last.0).as_secs_f64();
        if dt >= 0.5 {
            last.2 = p.output_tokens.saturating_sub(last.1) as f64 / dt;
            last.0 = p.elapsed;
            last.1 = p.output_tokens;
        }
        let msg = format!("errors {} · {:.0} tokens/s", p.failed, last.2);
        self.set(p.done, p.total, msg);
    }
}

impl qual_runner::RunProgress for Bar {
    fn update(&self, p: qual_runner::CaseProgress<'_>) {
        let msg = if p.repetition > 1 {
            format!("{} (repetition {})", esc(p.case_id), p.repetition)
        } else {
            esc(p.case_id).into_owned()
        };
        self.set(p.done, p.total, msg);
    }

    fn finished(&self) {
        if let Some(b) = &self.bar {
            b.set_position(b.length().unwrap_or(0));
            b.set_message("settling and writing the receipt");
        }
    }
}

impl qual_campaign::progress::CampaignProgress for Bar {
    fn update(&self, p: qual_campaign::progress::RowProgress<'_>) {
        let msg = format!("{} {}", esc(p.profile), esc(p.phase));
        self.set(p.done, p.total, msg);
    }
}
