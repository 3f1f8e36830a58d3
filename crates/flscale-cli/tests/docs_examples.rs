//! Examples that cannot rot (issue 40): every `flscale …` and `cargo run … -- …` command in a
//! shell block of README.md and docs/*.md, and every `flscale …` line of every subcommand's
//! `--help`, is run at quick size, and every repository path they show (`examples/…`,
//! `presets/…`, `docs/…`, `crates/…`, markdown links) must exist.
//!
//! How a command runs: with the binary under test (`cargo run --release --` becomes that
//! binary, and `-q` is added), in a fresh directory per document where the repository's
//! `examples`, `presets`, `catalog`, `docs` and `scripts` are linked in, so that paths read as
//! written and outputs (`runs/…`, `fig.svg`) stay in the test's directory; the commands of a
//! document run in order, so that `flscale pstar runs/fig2b` reads what the sweep before it
//! wrote. `> FILE` redirects stdout, `VAR=value` prefixes set the environment, `a && b` are two
//! commands, and an argument under `/tmp/` is moved into the test's directory. Each must exit
//! with status 0 within [`PER_COMMAND`].
//!
//! A command the docs show at a size that takes minutes or more, or that cannot run here (a
//! server, Slurm, a loop over shell variables), is listed in [`NOT_AS_WRITTEN`] — the one list
//! — either with the quick form the docs give for it or with the reason it is not run. An
//! entry that no longer matches any shown command fails the test too, so the list cannot rot
//! either.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The longest a shown command (or its quick form) may take before it counts as failed.
const PER_COMMAND: Duration = Duration::from_secs(90);

/// What is done instead of running a shown command as written.
#[derive(Debug, Clone, Copy)]
enum Instead {
    /// Run these arguments (after `flscale`) instead: the quick form; the reason says why.
    Run(&'static str, &'static str),
    /// Not run, for this reason (its paths are still checked).
    Skip(&'static str),
}

use Instead::{Run, Skip};

/// THE list of shown commands that are not run as written. Each key is the beginning of the
/// command as shown (after `flscale`, comments and redirections removed, spaces collapsed);
/// it applies to every shown command that starts with it.
const NOT_AS_WRITTEN: &[(&str, Instead)] = &[
    // --- servers and clusters
    ("flscale serve", Skip("a server: it runs until stopped (crates/flscale-cli/tests/serve_cli.rs starts and queries it)")),
    ("flscale sweep presets/experiments/fig2b.toml --out /tmp/fig2b --quick --emit-slurm 3", Skip("needs the local Slurm of scripts/slurm-local.sh (crates/flscale-cli/tests/slurm_cli.rs runs it)")),
    ("flscale status /tmp/fig2b", Skip("the Slurm example's store; crates/flscale-cli/tests/slurm_cli.rs runs it")),
    // --- refusals and placeholders
    ("flscale sample exp.toml", Skip("shows the memory refusal on the reader's own exp.toml (crates/flscale-cli/tests/bad_invocations.rs tests the refusal)")),
    ("flscale --max-memory 64G sample exp.toml", Skip("the reader's own exp.toml with another memory limit (tested in bad_invocations.rs)")),
    // --- shell loops (their files are checked as paths)
    ("flscale cavity solve --d 53 --n 88 --p 375 --t $t", Skip("inside a shell loop over $t; each step is a cavity solve of seconds, tested in cavity_cli.rs")),
    ("flscale sample examples/experiments/cavity-overlay/s$t-$s.toml", Skip("inside a shell loop over $t and $s: six samples of minutes each")),
    // --- the paper's sizes: minutes to hours; the quick forms the docs give
    ("flscale sample examples/experiments/fig2a.toml", Skip("the paper's Fig. 2(a): about an hour (its quick form is `flscale reproduce fig2a --quick`, run from docs/ldt-kernels.md)")),
    ("flscale sweep examples/sweeps/blog-cavity-overlay.toml", Skip("11 minutes (docs/cavity.md); `flscale reproduce blog --quick` is the quick form of the blog figure")),
    ("flscale cavity sweep-p --p-values 40,60,80,100,120,160,200,240,320,400 --langevin blog-overlay", Skip("reads the 11-minute sweep above; `cavity sweep-p` itself runs from the lines before")),
    ("flscale ldt tilted --histogram runs/fig2a --out fig2a.svg", Skip("reads runs/fig2a, the hour-long Fig. 2(a) run; the same command on the quick store runs further down docs/ldt-kernels.md")),
    ("flscale reproduce fig2b --out runs/fig2b", Run("reproduce fig2b --quick --out runs/fig2b", "the preset's full sizes take hours")),
    ("flscale sweep presets/experiments/fig2b.toml --out runs/fig2b --emit-slurm 16", Run("sweep presets/experiments/fig2b.toml --out runs/fig2b-slurm --quick --emit-slurm 16 --partition cpu --time 06:00:00 --cpus-per-task 8 --mem 4G --sbatch=--account=proj42", "writes the job array's script only; at quick sizes, into a store of its own")),
    ("flscale sweep presets/experiments/fig2b.toml --out runs/fig2b --dry-run", Run("sweep presets/experiments/fig2b.toml --out runs/fig2b --quick --dry-run", "the store above holds the quick sizes")),
    ("flscale sweep presets/experiments/fig3a.toml --out runs/fig3a --refine-pstar", Skip("refines P* of the full Fig. 3(a) sweep (days on two cores); experiment_cli.rs tests --refine-pstar on a small sweep")),
    ("flscale kernel propagate --out fig5.svg", Run("kernel propagate --quick --out fig5.svg", "Fig. 5's sizes: 12 s of CPU; --quick is the documented small size")),
    ("flscale kernel propagate --data powerlaw --layernorm", Run("kernel propagate --data powerlaw --layernorm --quick", "Fig. 6's sizes (N1 = N2 = 3000) are larger than Fig. 5's; --quick is the documented small size")),
    ("flscale kernel eigh-bench --n 4000", Run("kernel eigh-bench --n 400", "a benchmark of 4000² eigendecompositions: 27 s of CPU; the command at a small n")),
    ("flscale cavity sweep --over n --values 2800,2000,1400,1000,700", Run("cavity sweep --over n --values 1400,700 --readout-total 0.011 --d 40 --p 160 --t 0.05 --sigma-w2 0.5 --eps -1.2 --p-test 200 --out appd.svg --json", "App. D's d = 150, P = 600 at five widths: a minute of CPU; two widths at d = 40, P = 160")),
    ("flscale cavity sweep-p --p-values 50,100,150,200,300,400 --out sweep.svg", Run("cavity sweep-p --p-values 50,150 --out sweep.svg", "six self-consistent solves: 21 s of CPU; two of them")),
    // --- fixed-point maps: a grid² of solves each (40 s of CPU at 41², minutes at 61²); 9² here
    ("flscale cavity fixed-points --p 100 --p-test 300 --grid 41 --with-damped", Run("cavity fixed-points --p 100 --p-test 300 --grid 9 --with-damped", "a 41² map; 9²")),
    ("flscale cavity fixed-points --p 100 --b-range=-0.3,0.3 --c-range 0,0.4 --grid 61 --json", Run("cavity fixed-points --p 100 --b-range=-0.3,0.3 --c-range 0,0.4 --grid 9 --json", "a 61² map; 9²")),
    ("flscale cavity fixed-points --p 150 --grid 31", Run("cavity fixed-points --p 150 --grid 9", "a 31² map; 9²")),
    ("flscale cavity fixed-points --d 8 --n 8 --p 40 --grid 41 --with-damped --json", Run("cavity fixed-points --d 8 --n 8 --p 40 --grid 9 --with-damped --json", "a 41² map; 9²")),
    ("flscale cavity fixed-points --p 100 --s-a2 0.02 --b-range=-0.5,0.5 --c-range 0,0.5 --grid 61", Run("cavity fixed-points --p 100 --s-a2 0.02 --b-range=-0.5,0.5 --c-range 0,0.5 --grid 9", "a 61² map; 9²")),
    ("flscale bench", Skip("speed measurements: minutes by design (BENCHMARKS.md)")),
];

/// One command as shown, where it is shown.
#[derive(Debug, Clone)]
struct Shown {
    /// `README.md:4`, `flscale sample --help`.
    place: String,
    /// The arguments after `flscale`.
    args: Vec<String>,
    /// `VAR=value` prefixes.
    env: Vec<(String, String)>,
    /// `> FILE`: where stdout goes.
    stdout_to: Option<String>,
}

impl Shown {
    /// `flscale ARGS…` with spaces collapsed: what [`NOT_AS_WRITTEN`]'s keys start.
    fn key(&self) -> String {
        std::iter::once("flscale".to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A document or the help texts: the commands it shows, in order, and the paths it names.
#[derive(Debug, Default)]
struct Source {
    name: String,
    commands: Vec<Shown>,
    /// (path relative to the repository root, where it is named).
    paths: Vec<(String, String)>,
}

fn root() -> PathBuf {
    Path::new(ROOT).canonicalize().unwrap()
}

/// Splits a shell line into words, keeping quoted strings whole (quotes removed).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The line without its trailing `# comment` (a `#` outside quotes after whitespace).
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') if prev_space => return &line[..i],
            _ => {}
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// The flscale commands of one shell line (`a && b` gives two), or none.
fn commands_of_line(line: &str, place: &str) -> Vec<Shown> {
    let mut out = Vec::new();
    for part in strip_comment(line).split("&&") {
        let mut w = words(part.trim()).into_iter().peekable();
        let mut env = Vec::new();
        while let Some((k, v)) = w
            .peek()
            .and_then(|x| x.split_once('='))
            .filter(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
        {
            env.push((k, v));
            w.next();
        }
        let rest: Vec<String> = w.collect();
        let args: Vec<String> = match rest.first().map(String::as_str) {
            Some("flscale") => rest[1..].to_vec(),
            Some("cargo") if rest.get(1).map(String::as_str) == Some("run") => {
                match rest.iter().position(|x| x == "--") {
                    Some(i) => rest[i + 1..].to_vec(),
                    None => continue,
                }
            }
            _ => continue,
        };
        let (mut kept, mut stdout_to) = (Vec::new(), None);
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            if a == ">" {
                stdout_to = it.next();
            } else {
                kept.push(a);
            }
        }
        out.push(Shown {
            place: place.to_string(),
            args: kept,
            env,
            stdout_to,
        });
    }
    out
}

/// The top-level folders of the repository whose paths the docs name.
const REPO_DIRS: [&str; 8] = [
    "examples", "presets", "docs", "catalog", "crates", "scripts", "bench", ".ci",
];

/// Repository paths named in `text`: words beginning with one of [`REPO_DIRS`] and a `/`
/// that are not part of a longer path (`../shared/bench/…`, `/api/presets/NAME`).
fn repo_paths(text: &str) -> Vec<String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "_./$*-".contains(c);
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(i, _)) in chars.iter().enumerate() {
        let before = k.checked_sub(1).map(|j| chars[j].1);
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || "/._-$".contains(c)) {
            continue;
        }
        let Some(dir) = REPO_DIRS
            .iter()
            .find(|d| text[i..].starts_with(&format!("{d}/")))
        else {
            continue;
        };
        let len: usize = text[i..]
            .chars()
            .take_while(|&c| ok(c))
            .map(char::len_utf8)
            .sum();
        let path = text[i..i + len].trim_end_matches(['.', '-']);
        if path.len() > dir.len() + 1 {
            out.push(path.to_string());
        }
    }
    out
}

/// Markdown link targets of `text` that are files of the repository (not web addresses or
/// anchors), relative to the document's folder `base`.
fn link_paths(text: &str, base: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("](") {
        let target: String = text[i + 2..].chars().take_while(|&c| c != ')').collect();
        let target = target.split('#').next().unwrap_or("").trim();
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        out.push(if base.is_empty() {
            target.to_string()
        } else {
            format!("{base}/{target}")
        });
    }
    out
}

/// README.md and docs/*.md: the commands of their shell blocks and the paths they name.
fn markdown_sources() -> Vec<Source> {
    let root = root();
    let mut files = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(root.join(&name)).unwrap();
            let base = Path::new(&name)
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let mut src = Source {
                name: name.clone(),
                ..Default::default()
            };
            let (mut in_block, mut pending, mut first_line) = (false, String::new(), 0);
            for (i, line) in text.lines().enumerate() {
                let place = format!("{name}:{}", i + 1);
                for p in repo_paths(line).into_iter().chain(link_paths(line, &base)) {
                    src.paths.push((p, place.clone()));
                }
                if line.trim_start().starts_with("```") {
                    in_block = !in_block;
                    continue;
                }
                if !in_block {
                    continue;
                }
                if pending.is_empty() {
                    first_line = i + 1;
                }
                let body = strip_comment(line).trim_end();
                if let Some(head) = body.strip_suffix('\\') {
                    pending.push_str(head);
                    pending.push(' ');
                    continue;
                }
                pending.push_str(body);
                let joined = std::mem::take(&mut pending);
                src.commands
                    .extend(commands_of_line(&joined, &format!("{name}:{first_line}")));
            }
            src
        })
        .collect()
}

/// Runs the binary with `args` and returns its stdout.
fn help_text(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_flscale"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "flscale {args:?} failed");
    String::from_utf8(o.stdout).unwrap()
}

/// The subcommand names listed under `Commands:` of a help text (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect()
}

/// `flscale --help` and every subcommand's, recursively: their `flscale …` lines as commands,
/// the paths they name.
fn help_source() -> Source {
    let mut src = Source {
        name: "--help".into(),
        ..Default::default()
    };
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = queue.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = help_text(&args);
        let place = format!("flscale {}", args.join(" "));
        for line in help.lines() {
            for p in repo_paths(line) {
                src.paths.push((p, place.clone()));
            }
            // Examples are indented by two spaces ("Examples:", "Start here:"); the
            // description's "flscale implements …" is prose.
            if line.starts_with("  flscale ") {
                src.commands.extend(commands_of_line(line.trim(), &place));
            }
        }
        for sub in subcommands(&help).into_iter().rev() {
            let mut next = path.clone();
            next.push(sub);
            queue.push(next);
        }
    }
    src
}

fn all_sources() -> Vec<Source> {
    let mut s = markdown_sources();
    s.push(help_source());
    s
}

/// The entry of [`NOT_AS_WRITTEN`] for a command, if any (the longest matching key).
fn instead(cmd: &Shown) -> Option<(&'static str, Instead)> {
    let key = cmd.key();
    NOT_AS_WRITTEN
        .iter()
        .filter(|(k, _)| key == *k || key.starts_with(&format!("{k} ")))
        .max_by_key(|(k, _)| k.len())
        .copied()
}

/// Whether `path` (relative to the repository root; `*` and `$var` match any run of
/// characters within a name) names something that exists.
fn exists(root: &Path, path: &str) -> bool {
    let mut dirs = vec![root.to_path_buf()];
    for part in path.trim_end_matches('/').split('/') {
        let pattern: String = {
            // $var → *
            let mut p = String::new();
            let mut chars = part.chars().peekable();
            while let Some(c) = chars.next() {
                if c == '$' {
                    while chars
                        .peek()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
                    {
                        chars.next();
                    }
                    p.push('*');
                } else {
                    p.push(c);
                }
            }
            p
        };
        let mut next = Vec::new();
        for d in &dirs {
            if !pattern.contains('*') {
                let p = d.join(&pattern);
                if p.exists() {
                    next.push(p);
                }
                continue;
            }
            for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
                if glob_match(&pattern, &e.file_name().to_string_lossy()) {
                    next.push(e.path());
                }
            }
        }
        dirs = next;
    }
    !dirs.is_empty()
}

fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (0..=name.len() - head.len()).any(|i| {
                    name.is_char_boundary(head.len() + i)
                        && glob_match(tail, &name[head.len() + i..])
                })
        }
    }
}

/// A fresh working directory with the repository's folders linked in.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for d in ["examples", "presets", "catalog", "docs", "scripts"] {
        std::os::unix::fs::symlink(root().join(d), dir.path().join(d)).unwrap();
    }
    dir
}

/// CPU seconds (user + system) of the finished child processes of this test process: a
/// command's cost whatever the machine's load (exact with `--test-threads=1`).
fn children_cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// Runs `args` in `dir` with the given environment and stdout target; Err(why) if it fails or
/// takes longer than [`PER_COMMAND`].
fn run_in(
    dir: &Path,
    args: &[String],
    env: &[(String, String)],
    stdout_to: Option<&str>,
) -> Result<(Duration, f64), String> {
    let args: Vec<String> = args
        .iter()
        .map(|a| match a.strip_prefix("/tmp/") {
            Some(rest) => format!("tmp/{rest}"),
            None => a.clone(),
        })
        .collect();
    let stdout = match stdout_to {
        Some("/dev/null") | None => Stdio::null(),
        Some(f) => {
            let path = dir.join(f);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            Stdio::from(std::fs::File::create(path).unwrap())
        }
    };
    let stderr_path = dir.join(".stderr");
    let start = Instant::now();
    let cpu_before = children_cpu();
    let mut child = common::bin()
        .args(&args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::from(std::fs::File::create(&stderr_path).unwrap()))
        .spawn()
        .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let took = start.elapsed();
            if status.success() {
                return Ok((took, children_cpu() - cpu_before));
            }
            let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            return Err(format!(
                "exited with {status}: {}",
                err.lines().last().unwrap_or("")
            ));
        }
        if start.elapsed() > PER_COMMAND {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "ran longer than {} s: give it a quick form or the reason it is not run in NOT_AS_WRITTEN",
                PER_COMMAND.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs every command of the sources named `names` (in order, one working directory per
/// source) and fails listing each command that failed.
fn run_sources(names: &[&str]) {
    let sources: Vec<Source> = all_sources()
        .into_iter()
        .filter(|s| names.contains(&s.name.as_str()))
        .collect();
    assert_eq!(sources.len(), names.len(), "{names:?}");
    let mut failures = Vec::new();
    for src in sources {
        let dir = workdir();
        for cmd in &src.commands {
            let (args, why) = match instead(cmd) {
                Some((_, Skip(why))) => {
                    eprintln!("  not run  {}  `{}`: {why}", cmd.place, cmd.key());
                    continue;
                }
                Some((_, Run(quick, why))) => (words(quick), Some(why)),
                None => (cmd.args.clone(), None),
            };
            let shown = cmd.key();
            match run_in(dir.path(), &args, &cmd.env, cmd.stdout_to.as_deref()) {
                Ok((took, cpu)) => eprintln!(
                    "{:>6.1} s ({cpu:.1} s CPU)  {}  `{shown}`{}",
                    took.as_secs_f64(),
                    cmd.place,
                    why.map_or(String::new(), |_| format!(
                        " as `flscale {}`",
                        args.join(" ")
                    ))
                ),
                Err(e) => failures.push(format!(
                    "{}: `{shown}`{}: {e}",
                    cmd.place,
                    why.map_or(String::new(), |_| format!(
                        " (run as `flscale {}`)",
                        args.join(" ")
                    ))
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "shown commands that fail:\n  {}",
        failures.join("\n  ")
    );
}

/// Every repository path the docs and help texts show exists, every shown command is either
/// run or listed in [`NOT_AS_WRITTEN`] with its reason, and every entry of that list still
/// matches a shown command.
#[test]
fn shown_paths_exist_and_the_list_of_exceptions_is_current() {
    let root = root();
    let sources = all_sources();
    let mut missing = Vec::new();
    for src in &sources {
        for (path, place) in &src.paths {
            if !exists(&root, path) {
                missing.push(format!("{place}: {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths shown in the docs or --help that do not exist:\n  {}",
        missing.join("\n  ")
    );
    let commands: Vec<&Shown> = sources.iter().flat_map(|s| &s.commands).collect();
    assert!(
        commands.len() > 60,
        "only {} commands found",
        commands.len()
    );
    let used: BTreeSet<&str> = commands
        .iter()
        .filter_map(|c| instead(c))
        .map(|e| e.0)
        .collect();
    let stale: Vec<&str> = NOT_AS_WRITTEN
        .iter()
        .map(|e| e.0)
        .filter(|k| !used.contains(k))
        .collect();
    assert!(
        stale.is_empty(),
        "NOT_AS_WRITTEN entries that match no shown command (remove or update them):\n  {}",
        stale.join("\n  ")
    );
    // Every subcommand's help is read, and each shows at least one example.
    let help = sources.iter().find(|s| s.name == "--help").unwrap();
    for sub in [
        "predict",
        "energy",
        "sample",
        "sweep",
        "reproduce",
        "cavity potential",
    ] {
        assert!(
            help.commands
                .iter()
                .any(|c| c.key().starts_with(&format!("flscale {sub} "))),
            "no example of flscale {sub} in its --help"
        );
    }
}

#[test]
fn the_help_texts_examples_run() {
    run_sources(&["--help"]);
}

#[test]
fn the_readme_and_scaling_and_limits_examples_run() {
    run_sources(&[
        "README.md",
        "docs/scaling.md",
        "docs/limits.md",
        "docs/serve.md",
    ]);
}

#[test]
fn the_experiments_examples_run() {
    run_sources(&["docs/experiments.md"]);
}

#[test]
fn the_sampling_examples_run() {
    run_sources(&["docs/langevin.md"]);
}

#[test]
fn the_cavity_examples_run() {
    run_sources(&["docs/cavity.md"]);
}

#[test]
fn the_ldt_and_kernel_examples_run() {
    run_sources(&["docs/ldt-kernels.md"]);
}

#[test]
fn the_extraction_reads_shell_lines_as_the_shell_does() {
    let c = commands_of_line(
        r#"RAYON_NUM_THREADS=1 flscale energy "M*d + N/M" --free M  # comment"#,
        "x",
    );
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].args, ["energy", "M*d + N/M", "--free", "M"]);
    assert_eq!(
        c[0].env,
        [("RAYON_NUM_THREADS".to_string(), "1".to_string())]
    );
    let c = commands_of_line("flscale pstar runs/x && flscale fit runs/x > fit.txt", "x");
    assert_eq!(c.len(), 2);
    assert_eq!(c[1].stdout_to.as_deref(), Some("fit.txt"));
    let c = commands_of_line("cargo run --release -- predict --preset p   # x", "x");
    assert_eq!(c[0].key(), "flscale predict --preset p");
    assert!(commands_of_line("python3 examples/x.py", "x").is_empty());
    assert_eq!(
        repo_paths("see `examples/experiments/he3-quick.toml`, ../shared/bench/README.md and /api/presets/NAME."),
        ["examples/experiments/he3-quick.toml"]
    );
    assert!(glob_match("s*-*.toml", "s0.1-cold.toml") && !glob_match("s*-*.toml", "s0.1.toml"));
}
