//! `conformance-report RESULTS`: writes the conformance page
//! (`docs/conformance.md`) on stdout from one run of the official MCP
//! conformance suite, as `scripts/conformance.sh` leaves it in `RESULTS`:
//!
//! ```text
//! RESULTS/suite              the suite's npm spec, e.g. @modelcontextprotocol/conformance@0.2.0-alpha.12
//! RESULTS/revision           the protocol revision run, e.g. 2026-07-28
//! RESULTS/scenarios.txt      `conformance list --server`: every server scenario, with where it applies
//! RESULTS/requirements.txt   `conformance list --server --requirements REV`: what is scored, what runs unscored and why
//! RESULTS/checks/server-<scenario>-<timestamp>/checks.json   each scenario's checks (the suite's `-o`)
//! ```
//!
//! The page is a function of the results, not of the moment: the same
//! checks give the same bytes, whatever the timestamps, the order the
//! directories are listed in or the port the fixture had (nothing run-
//! specific, such as a check's timestamp or error message, is written; the
//! run's console has those). Exit status: 0 when every check passed and every
//! scenario that should have run did; 1 when a check failed or a result is
//! missing (the page says which); 2 when the results cannot be read.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Deserialize;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: conformance-report RESULTS_DIR   (see scripts/conformance.sh)");
        return ExitCode::from(2);
    };
    match Results::read(Path::new(&dir)) {
        Ok(results) => {
            let report = Report::new(&results);
            print!("{}", report.page());
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("conformance-report: {e}");
            ExitCode::from(2)
        }
    }
}

/// Scenario-name prefixes of the extensions agentgate implements: a listed
/// scenario of one of them that has no result is missing, not "not ours".
const OUR_EXTENSIONS: &[(&str, &str)] = &[("tasks-", "io.modelcontextprotocol/tasks")];

/// One check, as the suite writes it in `checks.json`.
#[derive(Debug, Clone, Deserialize)]
struct Check {
    id: String,
    description: String,
    /// `SUCCESS`, `FAILURE`, `WARNING`, `SKIPPED` or `INFO`.
    status: String,
    /// For a skipped check, why (static text); otherwise run-specific and
    /// never written to the page.
    #[serde(rename = "errorMessage", default)]
    error_message: Option<String>,
}

/// A server scenario of the suite, from `conformance list --server`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    name: String,
    /// Where it applies: protocol revisions, or `extension`.
    applies_to: Vec<String>,
}

/// Everything the page is made from.
#[derive(Debug)]
struct Results {
    suite: String,
    revision: String,
    listed: Vec<Listed>,
    /// Server scenarios the revision requires (scored), in the suite's order.
    required: Vec<String>,
    /// Server scenarios the revision runs without scoring, with the suite's reason.
    unscored: Vec<(String, String)>,
    /// Each run of each scenario (a scenario may have run more than once).
    runs: BTreeMap<String, Vec<Vec<Check>>>,
}

impl Results {
    fn read(dir: &Path) -> Result<Self, String> {
        let text = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| format!("reading {}: {e}", dir.join(name).display()))
        };
        let suite = text("suite")?.trim().to_owned();
        let revision = text("revision")?.trim().to_owned();
        let listed = parse_listing(&text("scenarios.txt")?);
        if listed.is_empty() {
            return Err("scenarios.txt lists no scenario".into());
        }
        let (required, unscored) = parse_requirements(&text("requirements.txt")?);
        if required.is_empty() {
            return Err(format!(
                "requirements.txt lists no server scenario for {revision}"
            ));
        }
        let mut runs: BTreeMap<String, Vec<Vec<Check>>> = BTreeMap::new();
        let checks_dir = dir.join("checks");
        let entries = std::fs::read_dir(&checks_dir)
            .map_err(|e| format!("reading {}: {e}", checks_dir.display()))?;
        let mut files: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| format!("reading {}: {e}", checks_dir.display()))?;
            files.push(entry.path());
        }
        files.sort();
        for path in files {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| format!("{}: not a UTF-8 name", path.display()))?;
            let Some(scenario) = scenario_of(name) else {
                return Err(format!(
                    "{}: not a `server-<scenario>-<timestamp>` results directory",
                    path.display()
                ));
            };
            let file = path.join("checks.json");
            let json = std::fs::read_to_string(&file)
                .map_err(|e| format!("reading {}: {e}", file.display()))?;
            let checks: Vec<Check> = serde_json::from_str(&json)
                .map_err(|e| format!("{}: not the suite's checks: {e}", file.display()))?;
            runs.entry(scenario.to_owned()).or_default().push(checks);
        }
        Ok(Self {
            suite,
            revision,
            listed,
            required,
            unscored,
            runs,
        })
    }
}

/// The scenario of a results directory, `server-<scenario>-<ISO time with
/// `:` and `.` made `-`>`, e.g. `server-caching-2026-12-06T01-08-52-670Z`.
fn scenario_of(dir: &str) -> Option<&str> {
    let rest = dir.strip_prefix("server-")?;
    // "-YYYY-MM-DDTHH-MM-SS-mmmZ"
    const STAMP: usize = 25;
    let cut = rest.len().checked_sub(STAMP)?;
    let (scenario, stamp) = rest.split_at_checked(cut)?;
    let shape = "-0000-00-00T00-00-00-000Z";
    let fits = stamp
        .chars()
        .zip(shape.chars())
        .all(|(c, s)| if s == '0' { c.is_ascii_digit() } else { c == s });
    (fits && !scenario.is_empty()).then_some(scenario)
}

/// `  - name [where, it, applies]` lines.
fn parse_listing(text: &str) -> Vec<Listed> {
    text.lines()
        .filter_map(|line| {
            let item = line.strip_prefix("  - ")?;
            let (name, tags) = match item.split_once(" [") {
                Some((name, tags)) => (name, tags.trim_end_matches(']')),
                None => (item, ""),
            };
            Some(Listed {
                name: name.trim().to_owned(),
                applies_to: tags
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
                    .collect(),
            })
        })
        .collect()
}

/// The server scenarios a revision requires, and those it runs unscored with
/// the suite's reason, from `conformance list --requirements REV`.
fn parse_requirements(text: &str) -> (Vec<String>, Vec<(String, String)>) {
    #[derive(PartialEq)]
    enum Section {
        Other,
        Server,
        Unscored,
    }
    let mut section = Section::Other;
    let mut reason = String::new();
    let mut required = Vec::new();
    let mut unscored = Vec::new();
    for line in text.lines() {
        if line.starts_with("Server scenarios") {
            section = Section::Server;
        } else if line.starts_with("Run and reported, but never scored") {
            section = Section::Unscored;
        } else if !line.starts_with(' ') && !line.is_empty() {
            section = Section::Other;
        } else if section == Section::Server {
            if let Some(name) = line.strip_prefix("  - ") {
                required.push(name.trim().to_owned());
            }
        } else if section == Section::Unscored {
            if let Some(item) = line.strip_prefix("    - ") {
                if let Some(name) = item.strip_suffix(" [server]") {
                    unscored.push((name.trim().to_owned(), reason.clone()));
                }
            } else if let Some(header) = line.strip_prefix("  ") {
                // "  extension (16):"
                reason = header
                    .split(" (")
                    .next()
                    .unwrap_or_default()
                    .trim_end_matches(':')
                    .to_owned();
            }
        }
    }
    (required, unscored)
}

/// What one scenario's runs came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Tally {
    passed: usize,
    failed: usize,
    warnings: usize,
    skipped: usize,
}

impl Tally {
    fn of(checks: &[Check]) -> Self {
        let count = |status: &str| checks.iter().filter(|c| c.status == status).count();
        Self {
            passed: count("SUCCESS"),
            failed: count("FAILURE"),
            warnings: count("WARNING"),
            skipped: count("SKIPPED"),
        }
    }

    /// Checks that count: passed or failed (the suite's own denominator).
    fn total(self) -> usize {
        self.passed + self.failed
    }
}

/// A check worth naming on the page: failed, warned or skipped.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Noted {
    scenario: String,
    id: String,
    description: String,
    /// The suite's reason, for a skipped check.
    reason: Option<String>,
}

struct Report<'r> {
    results: &'r Results,
    /// Per scenario run, its distinct tallies (one, unless runs differed).
    tallies: BTreeMap<&'r str, BTreeSet<Tally>>,
    failed: BTreeSet<Noted>,
    warned: BTreeSet<Noted>,
    skipped: BTreeSet<Noted>,
    /// Scenarios that should have a result and have none.
    missing: Vec<String>,
}

impl<'r> Report<'r> {
    fn new(results: &'r Results) -> Self {
        let mut tallies: BTreeMap<&str, BTreeSet<Tally>> = BTreeMap::new();
        let mut failed = BTreeSet::new();
        let mut warned = BTreeSet::new();
        let mut skipped = BTreeSet::new();
        for (scenario, runs) in &results.runs {
            for checks in runs {
                tallies
                    .entry(scenario.as_str())
                    .or_default()
                    .insert(Tally::of(checks));
                for check in checks {
                    let noted = |reason: Option<String>| Noted {
                        scenario: scenario.clone(),
                        id: check.id.clone(),
                        description: check.description.clone(),
                        reason,
                    };
                    match check.status.as_str() {
                        "FAILURE" => {
                            failed.insert(noted(None));
                        }
                        "WARNING" => {
                            warned.insert(noted(None));
                        }
                        "SKIPPED" => {
                            let reason = check.error_message.as_deref().map(|m| {
                                m.strip_prefix("Skipped: ").unwrap_or(m).trim().to_owned()
                            });
                            skipped.insert(noted(reason));
                        }
                        _ => {}
                    }
                }
            }
        }
        let ours = |name: &str| OUR_EXTENSIONS.iter().any(|(p, _)| name.starts_with(p));
        let mut missing: Vec<String> = results
            .required
            .iter()
            .chain(results.unscored.iter().map(|(name, _)| name))
            .chain(results.listed.iter().map(|l| &l.name).filter(|n| ours(n)))
            .filter(|name| !tallies.contains_key(name.as_str()))
            .cloned()
            .collect();
        missing.sort();
        missing.dedup();
        Self {
            results,
            tallies,
            failed,
            warned,
            skipped,
            missing,
        }
    }

    fn passed(&self) -> bool {
        self.failed.is_empty() && self.missing.is_empty()
    }

    /// `9/9`, or each distinct outcome when runs of a scenario differed.
    fn cell(&self, scenario: &str, show: impl Fn(Tally) -> String) -> String {
        match self.tallies.get(scenario) {
            None => "no result".to_owned(),
            Some(tallies) => tallies
                .iter()
                .map(|t| show(*t))
                .collect::<Vec<_>>()
                .join(" / "),
        }
    }

    fn row(&self, out: &mut String, scenario: &str, extra: Option<&str>) {
        let _ = write!(out, "| {scenario} |");
        if let Some(extra) = extra {
            let _ = write!(out, " {extra} |");
        }
        let _ = writeln!(
            out,
            " {} | {} | {} |",
            self.cell(scenario, |t| format!("{}/{}", t.passed, t.total())),
            self.cell(scenario, |t| t.failed.to_string()),
            self.cell(scenario, |t| t.warnings.to_string()),
        );
    }

    fn page(&self) -> String {
        let r = self.results;
        let rev = &r.revision;
        let mut out = String::new();
        let all: Tally = self
            .tallies
            .values()
            .filter_map(|t| t.iter().next_back().copied())
            .fold(Tally::of(&[]), |a, t| Tally {
                passed: a.passed + t.passed,
                failed: a.failed + t.failed,
                warnings: a.warnings + t.warnings,
                skipped: a.skipped + t.skipped,
            });
        let scored = |t: Option<&BTreeSet<Tally>>| t.and_then(|t| t.iter().next_back().copied());
        let (scored_passed, scored_total) = r
            .required
            .iter()
            .filter_map(|s| scored(self.tallies.get(s.as_str())))
            .fold((0, 0), |(p, n), t| (p + t.passed, n + t.total()));

        let _ = writeln!(out, "# Conformance\n");
        let _ = writeln!(
            out,
            "<!-- Written by scripts/conformance.sh (conformance-report, \
             crates/conformance-fixture/src/bin/) from the suite's own results; do not edit. \
             CI fails when this page differs from what its run writes. -->\n"
        );
        let _ = writeln!(
            out,
            "`scripts/conformance.sh` runs the official MCP conformance suite, `{}`, on Node 22 \
             through `npx`, against the conformance fixture (`crates/conformance-fixture`: \
             agentgate's engine and gateway on a fresh SQLite store), with \
             `--requirements {rev}`: every server scenario protocol {rev} requires, and those \
             the suite runs for it without scoring, the tasks extension's among them. A check \
             counts when it passed or failed; warnings and skipped checks are listed apart.\n",
            r.suite
        );
        let verdict = if self.passed() {
            "every check passed"
        } else {
            "NOT PASSING"
        };
        let _ = writeln!(
            out,
            "**Last run: {verdict}.** {} scenarios run; {} of {} checks passed, {} failed, {} \
             warnings, {} skipped by the suite. Scored for {rev}: {scored_passed} of \
             {scored_total}.\n",
            self.tallies.len(),
            all.passed,
            all.total(),
            all.failed,
            all.warnings,
            all.skipped,
        );

        let _ = writeln!(out, "## Required for {rev}\n");
        let _ = writeln!(out, "| scenario | passed | failed | warnings |");
        let _ = writeln!(out, "|---|---|---|---|");
        for scenario in &r.required {
            self.row(&mut out, scenario, None);
        }

        let _ = writeln!(out, "\n## Run, not scored\n");
        let _ = writeln!(
            out,
            "The suite runs these for {rev} but never scores them: `extension` is optional by \
             definition, `pending` means the suite's own reference server cannot pass it yet.\n"
        );
        let _ = writeln!(
            out,
            "| scenario | the suite's reason | passed | failed | warnings |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|");
        for (scenario, reason) in &r.unscored {
            self.row(&mut out, scenario, Some(reason));
        }
        let listed_elsewhere: BTreeSet<&str> = r
            .required
            .iter()
            .chain(r.unscored.iter().map(|(n, _)| n))
            .map(String::as_str)
            .collect();
        let extra: Vec<&str> = self
            .tallies
            .keys()
            .copied()
            .filter(|s| !listed_elsewhere.contains(s))
            .collect();
        for scenario in extra {
            self.row(&mut out, scenario, Some("run beside the requirements"));
        }

        let _ = writeln!(out, "\n## Failed checks\n");
        if self.failed.is_empty() && self.missing.is_empty() {
            let _ = writeln!(out, "None.");
        }
        for noted in &self.failed {
            let _ = writeln!(
                out,
                "- `{}`, check `{}`: {}",
                noted.scenario, noted.id, noted.description
            );
        }
        for scenario in &self.missing {
            let _ = writeln!(
                out,
                "- `{scenario}`: no result (it should have run; see the run's console output)"
            );
        }
        if !self.failed.is_empty() {
            let _ = writeln!(
                out,
                "\nEach failure's message is in the run's console output (it names ports and \
                 ids, so it is not kept here)."
            );
        }
        if !self.warned.is_empty() {
            let _ = writeln!(out, "\n## Warnings\n");
            for noted in &self.warned {
                let _ = writeln!(
                    out,
                    "- `{}`, check `{}`: {}",
                    noted.scenario, noted.id, noted.description
                );
            }
        }
        if !self.skipped.is_empty() {
            let _ = writeln!(out, "\n## Skipped by the suite\n");
            for noted in &self.skipped {
                let _ = write!(
                    out,
                    "- `{}`, check `{}`: {}",
                    noted.scenario, noted.id, noted.description
                );
                match &noted.reason {
                    Some(reason) => {
                        let _ = writeln!(out, " The suite says: \"{reason}\"");
                    }
                    None => {
                        let _ = writeln!(out);
                    }
                }
            }
        }

        let not_run: Vec<&Listed> = r
            .listed
            .iter()
            .filter(|l| !self.tallies.contains_key(l.name.as_str()))
            .filter(|l| !self.missing.contains(&l.name))
            .collect();
        let _ = writeln!(out, "\n## Not run\n");
        if not_run.is_empty() {
            let _ = writeln!(out, "None: every server scenario of the suite ran.");
        } else {
            let _ = writeln!(
                out,
                "The suite's other server scenarios, and why they are not part of this run. \
                 Where a scenario applies is the suite's own tag: those for earlier revisions \
                 only are not part of {rev}. agentgate still serves 2025-06-18 and 2025-11-25 \
                 clients; its end-to-end tests cover them ([testing](testing.md)).\n"
            );
            let _ = writeln!(out, "| scenario | applies to | why not run |");
            let _ = writeln!(out, "|---|---|---|");
            for listed in not_run {
                let applies = listed.applies_to.join(", ");
                let why = if listed.applies_to.iter().any(|t| t == "extension") {
                    "an extension agentgate does not implement".to_owned()
                } else if listed.applies_to.iter().any(|t| t == rev) {
                    format!("applies to {rev} but is neither required nor run by the suite for it")
                } else {
                    format!("not part of protocol {rev}")
                };
                let _ = writeln!(out, "| {} | {applies} | {why} |", listed.name);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of the suite against the fixture, captured as
    /// `scripts/conformance.sh` leaves it (`CONFORMANCE_RESULTS=DIR`), cut to
    /// a few scenarios.
    fn captured() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/conformance-run")
    }

    /// A copy of the captured run in a fresh directory, for a test to change.
    fn copy_of_captured() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_dir(&captured(), dir.path());
        dir
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for entry in std::fs::read_dir(from).expect("read_dir") {
            let entry = entry.expect("entry");
            let target = to.join(entry.file_name());
            if entry.path().is_dir() {
                copy_dir(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).expect("copy");
            }
        }
    }

    fn page_of(dir: &Path) -> (String, bool) {
        let results = Results::read(dir).expect("readable results");
        let report = Report::new(&results);
        (report.page(), report.passed())
    }

    /// Keeps only the requirements of scenarios that have a result, as if
    /// the suite had required just those.
    fn require_only_what_ran(dir: &Path) {
        let results = Results::read(dir).expect("readable results");
        let text = std::fs::read_to_string(dir.join("requirements.txt")).expect("read");
        let kept: Vec<&str> = text
            .lines()
            .filter(|line| {
                let name = line.trim_start().strip_prefix("- ").map(|n| {
                    n.trim_end_matches(" [server]")
                        .trim_end_matches(" [client]")
                });
                name.is_none_or(|n| results.runs.contains_key(n) || line.ends_with("[client]"))
            })
            .collect();
        std::fs::write(dir.join("requirements.txt"), kept.join("\n")).expect("write");
        let listed = std::fs::read_to_string(dir.join("scenarios.txt")).expect("read");
        let kept: Vec<&str> = listed
            .lines()
            .filter(|line| {
                // tasks-* scenarios must have a result; drop the ones cut away.
                !line.starts_with("  - tasks-")
                    || results
                        .runs
                        .keys()
                        .any(|s| line.starts_with(&format!("  - {s} ")))
            })
            .collect();
        std::fs::write(dir.join("scenarios.txt"), kept.join("\n")).expect("write");
    }

    #[test]
    fn directory_names_give_the_scenario() {
        assert_eq!(
            scenario_of("server-caching-2026-12-06T01-08-52-670Z"),
            Some("caching")
        );
        assert_eq!(
            scenario_of("server-input-required-result-multi-round-2026-12-06T01-08-58-001Z"),
            Some("input-required-result-multi-round")
        );
        assert_eq!(scenario_of("server-caching"), None);
        assert_eq!(scenario_of("client-x-2026-12-06T01-08-52-670Z"), None);
        assert_eq!(scenario_of("server-caching-2026-12-06T01:08:52.670Z"), None);
    }

    #[test]
    fn the_listings_are_read() {
        let dir = captured();
        let results = Results::read(&dir).expect("readable results");
        assert_eq!(results.revision, "2026-07-28");
        assert_eq!(
            results.suite,
            "@modelcontextprotocol/conformance@0.2.0-alpha.12"
        );
        assert_eq!(
            results.required.first().map(String::as_str),
            Some("server-stateless")
        );
        assert_eq!(results.required.len(), 37);
        assert!(
            results
                .unscored
                .contains(&("tasks-lifecycle".to_owned(), "extension".to_owned())),
            "{:?}",
            results.unscored
        );
        assert!(
            results
                .unscored
                .contains(&("json-schema-2020-12".to_owned(), "pending".to_owned()))
        );
        assert!(
            !results.unscored.iter().any(|(n, _)| n.starts_with("auth/")),
            "client scenarios are not the server's"
        );
        let initialize = results
            .listed
            .iter()
            .find(|l| l.name == "server-initialize")
            .expect("listed");
        assert_eq!(initialize.applies_to, ["2025-06-18", "2025-11-25"]);
    }

    #[test]
    fn a_clean_run_passes_and_its_page_shows_each_scenario() {
        let dir = copy_of_captured();
        require_only_what_ran(dir.path());
        let (page, passed) = page_of(dir.path());
        assert!(passed, "{page}");
        assert!(page.contains("**Last run: every check passed.**"), "{page}");
        assert!(
            page.contains("| server-stateless | 30/30 | 0 | 0 |"),
            "{page}"
        );
        assert!(page.contains("| caching | 8/8 | 0 | 0 |"), "{page}");
        assert!(
            page.contains("| tasks-lifecycle | extension | 9/9 | 0 | 0 |"),
            "{page}"
        );
        assert!(
            page.contains("| json-schema-2020-12 | pending | 8/8 | 0 | 0 |"),
            "{page}"
        );
        assert!(page.contains("## Failed checks\n\nNone."), "{page}");
        // The suite skips its notifications check itself, and says why.
        assert!(
            page.contains("- `tasks-status-notifications`, check `tasks-status-notifications`:"),
            "{page}"
        );
        assert!(
            page.contains("The suite says: \"SEP-2663 delivers"),
            "{page}"
        );
        // 2025-era scenarios are named as not run, with where they apply.
        assert!(
            page.contains(
                "| server-initialize | 2025-06-18, 2025-11-25 | not part of protocol 2026-07-28 |"
            ),
            "{page}"
        );
        assert!(
            page.contains("| sep-2640-skills-directory | extension | an extension agentgate does not implement |"),
            "{page}"
        );
    }

    #[test]
    fn the_page_is_the_same_whatever_the_time_and_order_of_the_run() {
        let dir = copy_of_captured();
        let (first, _) = page_of(dir.path());
        // Another run: every directory with another timestamp (so listed in
        // another order) and every check with another time.
        let checks = dir.path().join("checks");
        let mut renamed = 0;
        for entry in std::fs::read_dir(&checks).expect("read_dir") {
            let path = entry.expect("entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).expect("name");
            let scenario = scenario_of(name).expect("a results directory");
            let stamp = format!("2031-01-{:02}T09-15-00-{:03}Z", 28 - renamed, renamed);
            let json = std::fs::read_to_string(path.join("checks.json")).expect("read");
            let json = json.replace("\"timestamp\": \"2026-", "\"timestamp\": \"2031-");
            std::fs::write(path.join("checks.json"), json).expect("write");
            std::fs::rename(&path, checks.join(format!("server-{scenario}-{stamp}")))
                .expect("rename");
            renamed += 1;
        }
        assert!(renamed > 3, "renamed {renamed}");
        let (second, _) = page_of(dir.path());
        assert_eq!(first, second);
        assert!(
            !first.contains("2026-12"),
            "a run's time leaked into the page"
        );
        assert!(
            !first.contains("127.0.0.1"),
            "a run's address leaked into the page"
        );
    }

    #[test]
    fn a_failed_check_and_a_missing_scenario_fail_the_run_and_are_named() {
        let dir = copy_of_captured();
        require_only_what_ran(dir.path());
        // One check of one scenario failed...
        let checks = dir.path().join("checks");
        let caching = std::fs::read_dir(&checks)
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .find(|p| p.to_string_lossy().contains("server-caching-"))
            .expect("a caching run");
        let json = std::fs::read_to_string(caching.join("checks.json")).expect("read");
        let mut parsed: serde_json::Value = serde_json::from_str(&json).expect("json");
        let first = &mut parsed[0];
        first["status"] = "FAILURE".into();
        first["errorMessage"] = "expected 304 from http://127.0.0.1:41234/mcp".into();
        let failed_id = first["id"].as_str().expect("an id").to_owned();
        std::fs::write(caching.join("checks.json"), parsed.to_string()).expect("write");
        let (page, passed) = page_of(dir.path());
        assert!(!passed);
        assert!(page.contains("**Last run: NOT PASSING.**"), "{page}");
        assert!(page.contains("| caching | 7/8 | 1 | 0 |"), "{page}");
        assert!(
            page.contains(&format!("- `caching`, check `{failed_id}`:")),
            "{page}"
        );
        assert!(
            !page.contains("41234"),
            "a run's message leaked into the page"
        );

        // ...and a required scenario left no result.
        let tools_list = std::fs::read_dir(&checks)
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .find(|p| p.to_string_lossy().contains("server-tools-list-"))
            .expect("a tools-list run");
        std::fs::remove_dir_all(tools_list).expect("remove");
        let (page, passed) = page_of(dir.path());
        assert!(!passed);
        assert!(
            page.contains("| tools-list | no result | no result | no result |"),
            "{page}"
        );
        assert!(
            page.contains("- `tools-list`: no result (it should have run"),
            "{page}"
        );
    }

    #[test]
    fn a_tasks_scenario_without_a_result_is_missing_not_someone_elses_extension() {
        let dir = copy_of_captured();
        require_only_what_ran(dir.path());
        let mut listed = std::fs::read_to_string(dir.path().join("scenarios.txt")).expect("read");
        listed.push_str("\n  - tasks-something-new [extension]\n");
        std::fs::write(dir.path().join("scenarios.txt"), listed).expect("write");
        let (page, passed) = page_of(dir.path());
        assert!(!passed, "{page}");
        assert!(
            page.contains("- `tasks-something-new`: no result"),
            "{page}"
        );
    }

    #[test]
    fn unreadable_results_are_refused_with_the_file() {
        let dir = copy_of_captured();
        let checks = dir.path().join("checks");
        std::fs::create_dir(checks.join("server-oops")).expect("mkdir");
        let err = Results::read(dir.path()).expect_err("a stray directory");
        assert!(err.contains("server-oops"), "{err}");
        std::fs::remove_dir(checks.join("server-oops")).expect("rmdir");
        std::fs::remove_file(dir.path().join("revision")).expect("rm");
        let err = Results::read(dir.path()).expect_err("no revision");
        assert!(err.contains("revision"), "{err}");
    }
}
