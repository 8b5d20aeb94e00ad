//! Answering a server's input requests (elicitations), from flags, a
//! terminal, or piped stdin.
//!
//! [`InputSource`] is the seam [`Connection::call`](super::Connection::call)
//! and [`Connection::follow`](super::Connection::follow) use; [`Answers`] is
//! the command line's implementation. For each request, in key order:
//!
//! 1. `--input KEY=VALUE` naming the request's key answers it whole: a JSON
//!    object of form fields, or `accept`, `decline`, `cancel`.
//! 2. Otherwise, if any `--input FIELD=VALUE` names one of its form fields,
//!    or `--yes` was given, it is answered without reading stdin: those
//!    values, then the schema's defaults; with `--yes`, yes/no questions
//!    without a default are answered yes and URL requests count as done.
//! 3. Otherwise stdin is asked: on a terminal, one prompt per field and then
//!    a final "send this answer? [y/N]" showing what will be sent; when
//!    piped, lines in the format below.
//!
//! **Nothing is approved without an answer.** The end of stdin (`</dev/null`,
//! cron, CI), a closed stdin or no stdin at all never accepts a request: the
//! client stops with an error saying how to answer, and the task keeps
//! waiting on the server. Off a terminal, an approval needs `--yes`,
//! `--input`, or answer lines on stdin.
//!
//! Piped stdin, per form request: lines of `field=value` (the value as JSON
//! when it parses and fits the field, else text), or one JSON object with the
//! fields, ended by a blank line or the end of input; unset fields take their
//! defaults. A line `decline` or `cancel` refuses the request instead. Per
//! URL request: one line, blank (done) or `decline`/`cancel`.

use std::collections::HashSet;
use std::future::Future;
use std::io::Write as _;
use std::sync::Arc;

use anyhow::{Result, bail};
use rmcp::model::{InputRequests, InputResponses};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader, Lines, Stdin};

use super::form::{self, Field, Kind};

/// Answers a batch of outstanding input requests. Keys left out stay
/// outstanding; an error stops following (the task keeps waiting).
pub(crate) trait InputSource {
    fn answer(
        &mut self,
        requests: &InputRequests,
    ) -> impl Future<Output = Result<InputResponses>> + Send;
}

/// stdin as lines, shared so a Ctrl-C question can read from it after a
/// prompt was abandoned (`next_line` is cancel-safe: nothing read is lost).
pub(crate) type SharedStdin = Arc<tokio::sync::Mutex<Lines<BufReader<Stdin>>>>;

pub(crate) fn shared_stdin() -> SharedStdin {
    Arc::new(tokio::sync::Mutex::new(
        BufReader::new(tokio::io::stdin()).lines(),
    ))
}

/// The command line's answers: `--input`, `--yes`, then stdin.
#[derive(Debug)]
pub(crate) struct Answers {
    presets: Vec<(String, String)>,
    used: HashSet<String>,
    yes: bool,
    stdin: Option<SharedStdin>,
    tty: bool,
    line: usize,
}

/// How one request was answered.
enum Reply {
    Accept(Option<Map<String, Value>>),
    Decline,
    Cancel,
}

impl Reply {
    fn to_json(&self) -> Value {
        match self {
            Self::Accept(Some(content)) => json!({"action": "accept", "content": content}),
            Self::Accept(None) => json!({"action": "accept"}),
            Self::Decline => json!({"action": "decline"}),
            Self::Cancel => json!({"action": "cancel"}),
        }
    }

    fn word(word: &str) -> Option<Self> {
        match word
            .trim()
            .trim_start_matches(':')
            .to_ascii_lowercase()
            .as_str()
        {
            "decline" => Some(Self::Decline),
            "cancel" => Some(Self::Cancel),
            _ => None,
        }
    }
}

impl Answers {
    /// `presets` are `NAME=VALUE` pairs from `--input`; `stdin` is read when
    /// they do not answer a request (`None`: never read, fail instead).
    pub(crate) fn new(
        presets: Vec<(String, String)>,
        yes: bool,
        stdin: Option<SharedStdin>,
    ) -> Self {
        use std::io::IsTerminal as _;
        Self {
            presets,
            used: HashSet::new(),
            yes,
            stdin,
            tty: std::io::stdin().is_terminal(),
            line: 0,
        }
    }

    /// `--input` names that matched no request or field so far.
    pub(crate) fn unused(&self) -> Vec<&str> {
        self.presets
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !self.used.contains(*n))
            .collect()
    }

    fn preset(&mut self, name: &str) -> Option<String> {
        let value = self
            .presets
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())?;
        self.used.insert(name.to_owned());
        Some(value)
    }

    async fn read_line(&mut self) -> Result<Option<String>> {
        let Some(stdin) = &self.stdin else {
            return Ok(None);
        };
        let line = stdin.lock().await.next_line().await?;
        if line.is_some() {
            self.line += 1;
        }
        Ok(line)
    }

    async fn answer_one(&mut self, key: &str, request: &Value) -> Result<Reply> {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("?");
        if method != "elicitation/create" {
            bail!(
                "input request `{key}` is a `{method}` request; agentgate call answers only \
                 elicitations (forms and URLs)"
            );
        }
        let params = request.get("params").cloned().unwrap_or_default();
        let message = params
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match params.get("mode").and_then(Value::as_str) {
            Some("url") => {
                let url = params
                    .get("url")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.answer_url(key, &message, &url).await
            }
            _ => {
                let schema = params.get("requestedSchema").cloned().unwrap_or_default();
                let fields = form::fields(&schema)
                    .map_err(|e| anyhow::anyhow!("input request `{key}`: {e}"))?;
                self.answer_form(key, &message, &fields).await
            }
        }
    }

    async fn answer_url(&mut self, key: &str, message: &str, url: &str) -> Result<Reply> {
        if let Some(value) = self.preset(key) {
            return match value.trim() {
                "accept" | "done" | "\"accept\"" => Ok(Reply::Accept(None)),
                other => Reply::word(other.trim_matches('"')).ok_or_else(|| {
                    anyhow::anyhow!(
                        "--input {key}={value}: a URL request takes accept, decline or cancel"
                    )
                }),
            };
        }
        if self.yes {
            return Ok(Reply::Accept(None));
        }
        if self.stdin.is_none() {
            bail!(
                "input request `{key}` asks you to open {url} ({message}); open it, then answer \
                 with --input {key}=accept or --yes"
            );
        }
        eprintln!("{} {message}", console::style("?").yellow().bold());
        eprintln!(
            "  Open this URL to continue: {}",
            console::style(url).underlined()
        );
        if self.tty {
            eprint!("  Press Enter when done (or type :decline or :cancel): ");
            let _ = std::io::stderr().flush();
        }
        let Some(line) = self.read_line().await? else {
            bail!(
                "stdin ended before input request `{key}` (open {url}) was answered; pipe a \
                 blank line once done, or pass --input {key}=accept"
            );
        };
        match line.trim() {
            "" | "accept" | "done" => Ok(Reply::Accept(None)),
            other => Reply::word(other).ok_or_else(|| {
                anyhow::anyhow!(
                    "stdin line {}: `{other}`: a URL request takes a blank line (done), decline or cancel",
                    self.line
                )
            }),
        }
    }

    async fn answer_form(&mut self, key: &str, message: &str, fields: &[Field]) -> Result<Reply> {
        if let Some(value) = self.preset(key) {
            return self.whole_preset(key, &value, fields);
        }
        let mut content = Map::new();
        let mut preset_any = false;
        for field in fields {
            if let Some(text) = self.preset(&field.name) {
                let value = field.parse(&text).map_err(|e| {
                    anyhow::anyhow!(
                        "--input {}={text}: {e} (expected {})",
                        field.name,
                        field.expected()
                    )
                })?;
                content.insert(field.name.clone(), value);
                preset_any = true;
            }
        }
        if preset_any || self.yes {
            self.fill_defaults(&mut content, fields);
            check_required(key, message, fields, &content, "")?;
            return Ok(Reply::Accept(Some(content)));
        }
        if self.stdin.is_none() {
            bail!(unanswered(key, message, "no answer was given"));
        }
        if self.tty {
            self.prompt_form(key, message, fields).await
        } else {
            self.read_form_lines(key, message, fields).await
        }
    }

    fn whole_preset(&self, key: &str, value: &str, fields: &[Field]) -> Result<Reply> {
        let trimmed = value.trim().trim_matches('"');
        if let Some(reply) = Reply::word(trimmed) {
            return Ok(reply);
        }
        let mut content = Map::new();
        if trimmed != "accept" {
            let Ok(Value::Object(given)) = serde_json::from_str::<Value>(value) else {
                bail!(
                    "--input {key}={value}: expected a JSON object of the form's fields (e.g. \
                     --input '{key}={{\"{}\": ...}}'), or accept, decline or cancel",
                    fields.first().map_or("field", |f| f.name.as_str())
                );
            };
            content = given;
        }
        let mut checked = Map::new();
        for (name, value) in content {
            let Some(field) = fields.iter().find(|f| f.name == name) else {
                bail!(
                    "--input {key}: the form has no field `{name}`; its fields: {}",
                    names(fields)
                );
            };
            field
                .check(&value)
                .map_err(|e| anyhow::anyhow!("--input {key}: field `{name}`: {e}"))?;
            checked.insert(name, value);
        }
        self.fill_defaults(&mut checked, fields);
        check_required(key, "", fields, &checked, "")?;
        Ok(Reply::Accept(Some(checked)))
    }

    fn fill_defaults(&self, content: &mut Map<String, Value>, fields: &[Field]) {
        for field in fields {
            if content.contains_key(&field.name) {
                continue;
            }
            if let Some(default) = &field.default {
                content.insert(field.name.clone(), default.clone());
            } else if self.yes && field.kind == Kind::Boolean {
                // --yes confirms.
                content.insert(field.name.clone(), Value::Bool(true));
            }
        }
    }

    async fn read_form_lines(
        &mut self,
        key: &str,
        message: &str,
        fields: &[Field],
    ) -> Result<Reply> {
        let mut content = Map::new();
        let first_line = self.line;
        loop {
            let Some(line) = self.read_line().await? else {
                if self.line == first_line {
                    // Not one line for this request: stdin was empty or
                    // closed, which is nobody's approval.
                    bail!(unanswered(
                        key,
                        message,
                        "stdin ended before it was answered"
                    ));
                }
                break;
            };
            let text = line.trim();
            let at = self.line;
            if text.is_empty() || text == "accept" {
                break;
            }
            if let Some(reply) = Reply::word(text) {
                return Ok(reply);
            }
            if text.starts_with('{') {
                let Ok(Value::Object(given)) = serde_json::from_str::<Value>(text) else {
                    bail!("stdin line {at}: not a JSON object: {text}");
                };
                for (name, value) in given {
                    let field = field_named(fields, &name, at)?;
                    field
                        .check(&value)
                        .map_err(|e| anyhow::anyhow!("stdin line {at}: field `{name}`: {e}"))?;
                    content.insert(name, value);
                }
                break;
            }
            let Some((name, value)) = text.split_once('=') else {
                bail!(
                    "stdin line {at} `{text}`: expected field=value, a JSON object, a blank line, \
                     or decline/cancel (fields of `{key}`: {})",
                    names(fields)
                );
            };
            let field = field_named(fields, name.trim(), at)?;
            let value = field.parse(value).map_err(|e| {
                anyhow::anyhow!(
                    "stdin line {at}: field `{}`: {e} (expected {})",
                    field.name,
                    field.expected()
                )
            })?;
            content.insert(field.name.clone(), value);
        }
        self.fill_defaults(&mut content, fields);
        check_required(key, message, fields, &content, " on stdin")?;
        Ok(Reply::Accept(Some(content)))
    }

    async fn prompt_form(&mut self, key: &str, message: &str, fields: &[Field]) -> Result<Reply> {
        eprintln!("{} {message}", console::style("?").yellow().bold());
        eprintln!(
            "  {}",
            console::style("Enter keeps the [default]; type :decline or :cancel to refuse").dim()
        );
        let mut content = Map::new();
        for field in fields {
            if let Kind::Choice(options) | Kind::Choices(options) = &field.kind {
                for (i, (value, title)) in options.iter().enumerate() {
                    let shown = if title == value {
                        value.clone()
                    } else {
                        format!("{title} ({value})")
                    };
                    eprintln!("    {}) {shown}", i + 1);
                }
            }
            loop {
                let description = field
                    .description
                    .as_deref()
                    .map(|d| format!(" — {d}"))
                    .unwrap_or_default();
                let default = field
                    .default
                    .as_ref()
                    .map(|d| {
                        format!(
                            " [{}]",
                            d.as_str().map_or_else(|| d.to_string(), str::to_owned)
                        )
                    })
                    .unwrap_or_default();
                let optional = if field.required { "" } else { ", optional" };
                eprint!(
                    "  {}{description} ({}{optional}){default}: ",
                    console::style(field.label()).bold(),
                    field.expected()
                );
                let _ = std::io::stderr().flush();
                let Some(line) = self.read_line().await? else {
                    bail!(unanswered(
                        key,
                        message,
                        &format!("stdin ended while answering `{}`", field.name)
                    ));
                };
                let text = line.trim();
                if text.starts_with(':')
                    && let Some(reply) = Reply::word(text)
                {
                    return Ok(reply);
                }
                if text.is_empty() {
                    if let Some(default) = &field.default {
                        content.insert(field.name.clone(), default.clone());
                        break;
                    }
                    if !field.required {
                        break;
                    }
                    eprintln!(
                        "  {}",
                        console::style(format!("{} is required", field.label())).red()
                    );
                    continue;
                }
                match field.parse(text) {
                    Ok(value) => {
                        content.insert(field.name.clone(), value);
                        break;
                    }
                    Err(e) => eprintln!("  {}", console::style(e).red()),
                }
            }
        }
        self.confirm(key, message, &content).await
    }

    /// The last word on a terminal: what will be sent, and whether to send
    /// it. Only `y`/`yes` accepts; `n`, a blank line or anything else
    /// declines; the end of stdin sends nothing.
    async fn confirm(
        &mut self,
        key: &str,
        message: &str,
        content: &Map<String, Value>,
    ) -> Result<Reply> {
        eprintln!("  {}", console::style("This answer will be sent:").bold());
        for (name, value) in content {
            let shown = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            eprintln!("    {name}: {shown}");
        }
        eprint!("  Send it? [y/N]: ");
        let _ = std::io::stderr().flush();
        let Some(line) = self.read_line().await? else {
            bail!(unanswered(
                key,
                message,
                "stdin ended before the confirmation"
            ));
        };
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Ok(Reply::Accept(Some(content.clone()))),
            _ => {
                eprintln!(
                    "  {}",
                    console::style("Declined: nothing was approved.").yellow()
                );
                Ok(Reply::Decline)
            }
        }
    }
}

/// Why a request was left unanswered, and how to answer it: nothing is
/// approved on a user's behalf.
fn unanswered(key: &str, message: &str, why: &str) -> String {
    let asked = if message.is_empty() {
        String::new()
    } else {
        format!(" ({message:?})")
    };
    format!(
        "input request `{key}`{asked} was not answered: {why}, and nothing is approved without \
         an answer. Answer on a terminal, pipe `field=value` lines ended by a blank line, pass \
         --input FIELD=VALUE or --input {key}=decline, or --yes to accept it as proposed"
    )
}

impl InputSource for Answers {
    async fn answer(&mut self, requests: &InputRequests) -> Result<InputResponses> {
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let request = serde_json::to_value(request)?;
            let reply = self.answer_one(key, &request).await?;
            responses.insert(key.clone(), reply.to_json());
        }
        Ok(responses)
    }
}

fn names(fields: &[Field]) -> String {
    fields
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn field_named<'a>(fields: &'a [Field], name: &str, line: usize) -> Result<&'a Field> {
    fields.iter().find(|f| f.name == name).ok_or_else(|| {
        anyhow::anyhow!(
            "stdin line {line}: the form has no field `{name}`; its fields: {}",
            names(fields)
        )
    })
}

fn check_required(
    key: &str,
    message: &str,
    fields: &[Field],
    content: &Map<String, Value>,
    source: &str,
) -> Result<()> {
    if let Some(missing) = fields
        .iter()
        .find(|f| f.required && !content.contains_key(&f.name))
    {
        let asked = if message.is_empty() {
            String::new()
        } else {
            format!(" ({message:?})")
        };
        bail!(
            "input request `{key}`{asked} needs field `{name}` ({expected}){source}: pass \
             --input {name}=VALUE, pipe a `{name}=VALUE` line on stdin, or answer on a terminal",
            name = missing.name,
            expected = missing.expected(),
        );
    }
    Ok(())
}
