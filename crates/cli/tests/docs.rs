//! Shell completions and the manual page come from the same clap definitions as `--help`,
//! and `--help` carries the exit-code table.

#![allow(clippy::unwrap_used)]

mod common;

use common::{inferscale, stdout};

#[test]
fn completions_and_the_man_page_know_every_command_and_flag() {
    for shell in ["bash", "zsh", "fish"] {
        let o = inferscale().args(["completions", shell]).output().unwrap();
        assert!(o.status.success(), "{shell}");
        let text = stdout(&o);
        for word in ["inferscale", "generate", "api-key-file", "speedup"] {
            assert!(text.contains(word), "{shell} completion lacks {word}");
        }
    }
    let o = inferscale().arg("man").output().unwrap();
    assert!(o.status.success());
    let page = stdout(&o);
    assert!(
        page.starts_with(".ie") || page.contains(".TH inferscale"),
        "{}",
        &page[..200.min(page.len())]
    );
    for section in [
        "INFERSCALE RUN",
        "INFERSCALE LOAD",
        "INFERSCALE GENERATE",
        "INFERSCALE MONITOR",
        "INFERSCALE CHECK",
    ] {
        assert!(page.contains(section), "man page lacks {section}");
    }
    assert!(page.contains("api\\-key\\-file"), "flags are listed");
    let o = inferscale().arg("--help").output().unwrap();
    let help = stdout(&o);
    for code in [
        "0  success",
        "1  the work was done and a check failed",
        "2  usage or input error",
        "3  a failure after work began",
    ] {
        assert!(help.contains(code), "--help lacks {code:?}:\n{help}");
    }
}
