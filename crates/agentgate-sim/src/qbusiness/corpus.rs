//! The emulator's document corpus and its BM25 index.
//!
//! The corpus is a dozen short intranet pages of an invented company, Northwind Robotics,
//! shipped as `crates/agentgate-sim/corpus/*.md` and compiled in with `include_str!`, so the binary
//! is self-contained. Each file starts with a front-matter block (`id`, `title`, `url`,
//! `category`, `updated` as `YYYY-MM-DD`) followed by prose paragraphs. The text is ASCII
//! only, so byte offsets and character offsets agree.
//!
//! Retrieval ranks **sentences** with Okapi BM25 (`k1 = 1.2`, `b = 0.75`, Lucene's
//! non-negative IDF). A sentence is indexed together with its document's title, so a
//! question about "vacation" finds the sentences of the "Holiday and vacation policy"
//! page. The tokenizer lowercases, splits on non-alphanumerics, drops a few stop words
//! and strips a plural `s`.

use std::collections::HashMap;

use chrono::NaiveDate;

/// BM25 term-frequency saturation.
pub(super) const K1: f64 = 1.2;
/// BM25 length normalisation.
pub(super) const B: f64 = 0.75;

const SOURCES: &[(&str, &str)] = &[
    (
        "holiday-policy.md",
        include_str!("../../corpus/holiday-policy.md"),
    ),
    (
        "expense-policy.md",
        include_str!("../../corpus/expense-policy.md"),
    ),
    ("vpn-setup.md", include_str!("../../corpus/vpn-setup.md")),
    (
        "on-call-rotation.md",
        include_str!("../../corpus/on-call-rotation.md"),
    ),
    (
        "security-incident-process.md",
        include_str!("../../corpus/security-incident-process.md"),
    ),
    (
        "parental-leave.md",
        include_str!("../../corpus/parental-leave.md"),
    ),
    (
        "office-locations.md",
        include_str!("../../corpus/office-locations.md"),
    ),
    (
        "travel-booking.md",
        include_str!("../../corpus/travel-booking.md"),
    ),
    (
        "laptop-refresh.md",
        include_str!("../../corpus/laptop-refresh.md"),
    ),
    (
        "code-review-guidelines.md",
        include_str!("../../corpus/code-review-guidelines.md"),
    ),
    (
        "benefits-enrollment.md",
        include_str!("../../corpus/benefits-enrollment.md"),
    ),
    (
        "it-help-desk.md",
        include_str!("../../corpus/it-help-desk.md"),
    ),
];

const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
    "get", "how", "i", "in", "is", "it", "me", "my", "of", "on", "or", "our", "tell", "that",
    "the", "their", "there", "this", "to", "we", "what", "when", "where", "which", "who", "why",
    "will", "with", "you", "your",
];

/// One intranet page.
#[derive(Clone, Debug)]
pub struct Document {
    /// Stable document id, e.g. `nwr-hr-0001`.
    pub id: String,
    /// Page title.
    pub title: String,
    /// Page URL on the (fictional) intranet.
    pub url: String,
    /// The `_category` attribute, e.g. `HR`.
    pub category: String,
    /// Last update, epoch seconds (`_last_updated_at`).
    pub updated_at: i64,
    /// Prose paragraphs.
    pub paragraphs: Vec<String>,
}

/// One retrievable unit: a sentence of a paragraph of a document.
#[derive(Clone, Debug)]
pub struct Passage {
    /// Index into [`Corpus::documents`].
    pub document: usize,
    /// Index into the document's paragraphs.
    pub paragraph: usize,
    /// Position of the sentence in the whole document (for reading order).
    pub position: usize,
    /// The sentence, trimmed, ending with its punctuation.
    pub text: String,
}

/// The documents, their sentences and the BM25 index over the sentences.
#[derive(Clone, Debug)]
pub struct Corpus {
    documents: Vec<Document>,
    passages: Vec<Passage>,
    index: Bm25,
}

/// A problem with a corpus file (only possible if a shipped file is edited badly).
#[derive(Debug, thiserror::Error)]
#[error("corpus file {file}: {problem}")]
pub(super) struct CorpusError {
    file: String,
    problem: String,
}

impl Corpus {
    /// The shipped Northwind Robotics corpus. Files that fail to parse are skipped with a
    /// warning (a unit test makes sure none does).
    pub fn northwind() -> Self {
        let mut documents = Vec::new();
        for (file, text) in SOURCES {
            match parse_document(file, text) {
                Ok(doc) => documents.push(doc),
                Err(e) => tracing::warn!("{e}"),
            }
        }
        Self::from_documents(documents)
    }

    /// A corpus over the given documents.
    pub fn from_documents(documents: Vec<Document>) -> Self {
        let mut passages = Vec::new();
        let mut indexed = Vec::new();
        for (d, doc) in documents.iter().enumerate() {
            let title_tokens = tokenize(&doc.title);
            let mut position = 0;
            for (p, paragraph) in doc.paragraphs.iter().enumerate() {
                for sentence in split_sentences(paragraph) {
                    let mut tokens = tokenize(&sentence);
                    tokens.extend(title_tokens.iter().cloned());
                    indexed.push(tokens);
                    passages.push(Passage {
                        document: d,
                        paragraph: p,
                        position,
                        text: sentence,
                    });
                    position += 1;
                }
            }
        }
        Self {
            documents,
            passages,
            index: Bm25::new(indexed),
        }
    }

    /// All documents.
    pub fn documents(&self) -> &[Document] {
        &self.documents
    }

    /// All passages (sentences).
    pub fn passages(&self) -> &[Passage] {
        &self.passages
    }

    /// Ranks passages for weighted query terms; only passages scoring above zero whose
    /// document passes `keep` are returned, best first.
    pub fn rank(
        &self,
        query: &[(String, f64)],
        keep: impl Fn(&Document) -> bool,
    ) -> Vec<(usize, f64)> {
        self.index
            .rank(query)
            .into_iter()
            .filter(|(i, _)| {
                self.passages
                    .get(*i)
                    .and_then(|p| self.documents.get(p.document))
                    .is_some_and(&keep)
            })
            .collect()
    }
}

fn parse_document(file: &str, text: &str) -> Result<Document, CorpusError> {
    let err = |problem: &str| CorpusError {
        file: file.to_owned(),
        problem: problem.to_owned(),
    };
    let rest = text
        .strip_prefix("---\n")
        .ok_or_else(|| err("missing front matter"))?;
    let (front, body) = rest
        .split_once("\n---\n")
        .ok_or_else(|| err("unterminated front matter"))?;
    let mut fields: HashMap<&str, &str> = HashMap::new();
    for line in front.lines() {
        if let Some((k, v)) = line.split_once(':') {
            fields.insert(k.trim(), v.trim());
        }
    }
    let field = |name: &str| {
        fields
            .get(name)
            .map(|v| (*v).to_owned())
            .ok_or_else(|| err(&format!("missing `{name}`")))
    };
    let updated = field("updated")?;
    let updated_at = NaiveDate::parse_from_str(&updated, "%Y-%m-%d")
        .map_err(|_| err("`updated` is not YYYY-MM-DD"))?
        .and_hms_opt(9, 0, 0)
        .map(|t| t.and_utc().timestamp())
        .ok_or_else(|| err("bad date"))?;
    let paragraphs = body
        .split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect();
    Ok(Document {
        id: field("id")?,
        title: field("title")?,
        url: field("url")?,
        category: field("category")?,
        updated_at,
        paragraphs,
    })
}

/// Splits a paragraph into sentences at `.`, `!` or `?` followed by whitespace or the end.
pub(super) fn split_sentences(paragraph: &str) -> Vec<String> {
    let mut sentences = Vec::new();
    let mut start = 0;
    let bytes = paragraph.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        let at_end = i + 1 == bytes.len();
        if matches!(b, b'.' | b'!' | b'?') && (at_end || bytes[i + 1].is_ascii_whitespace()) {
            let sentence = paragraph[start..=i].trim();
            if !sentence.is_empty() {
                sentences.push(sentence.to_owned());
            }
            start = i + 1;
        }
    }
    let tail = paragraph[start..].trim();
    if !tail.is_empty() {
        sentences.push(tail.to_owned());
    }
    sentences
}

/// Lowercases, splits on non-alphanumerics, drops stop words and strips a plural `s`.
pub(super) fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .filter(|t| !STOP_WORDS.contains(&t.as_str()))
        .map(|t| stem(&t))
        .collect()
}

fn stem(token: &str) -> String {
    if token.len() > 4 && token.ends_with("ies") {
        format!("{}y", &token[..token.len() - 3])
    } else if token.len() > 3
        && token.ends_with('s')
        && !token.ends_with("ss")
        && !token.ends_with("us")
    {
        token[..token.len() - 1].to_owned()
    } else {
        token.to_owned()
    }
}

/// Query terms from free text, each with `weight` (repeated terms add up).
pub(super) fn query_terms(text: &str, weight: f64) -> Vec<(String, f64)> {
    let mut terms: Vec<(String, f64)> = Vec::new();
    for token in tokenize(text) {
        match terms.iter_mut().find(|(t, _)| *t == token) {
            Some((_, w)) => *w += weight,
            None => terms.push((token, weight)),
        }
    }
    terms
}

/// An Okapi BM25 index over tokenized documents (here: sentences).
#[derive(Clone, Debug)]
pub struct Bm25 {
    term_freqs: Vec<HashMap<String, u32>>,
    lengths: Vec<usize>,
    avg_len: f64,
    doc_freq: HashMap<String, usize>,
}

impl Bm25 {
    /// Builds the index.
    pub fn new(docs: Vec<Vec<String>>) -> Self {
        let mut doc_freq: HashMap<String, usize> = HashMap::new();
        let mut term_freqs = Vec::with_capacity(docs.len());
        let mut lengths = Vec::with_capacity(docs.len());
        for tokens in docs {
            let mut tf: HashMap<String, u32> = HashMap::new();
            for t in &tokens {
                *tf.entry(t.clone()).or_default() += 1;
            }
            for t in tf.keys() {
                *doc_freq.entry(t.clone()).or_default() += 1;
            }
            lengths.push(tokens.len());
            term_freqs.push(tf);
        }
        let avg_len = if lengths.is_empty() {
            0.0
        } else {
            lengths.iter().sum::<usize>() as f64 / lengths.len() as f64
        };
        Self {
            term_freqs,
            lengths,
            avg_len,
            doc_freq,
        }
    }

    /// Inverse document frequency, `ln(1 + (N - df + 0.5) / (df + 0.5))`.
    pub fn idf(&self, term: &str) -> f64 {
        let n = self.term_freqs.len() as f64;
        let df = self.doc_freq.get(term).copied().unwrap_or(0) as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// BM25 score of document `doc` for weighted query terms.
    pub fn score(&self, doc: usize, query: &[(String, f64)]) -> f64 {
        let (Some(tf), Some(&len)) = (self.term_freqs.get(doc), self.lengths.get(doc)) else {
            return 0.0;
        };
        let norm = if self.avg_len > 0.0 {
            len as f64 / self.avg_len
        } else {
            1.0
        };
        query
            .iter()
            .map(|(term, weight)| {
                let f = f64::from(tf.get(term).copied().unwrap_or(0));
                if f == 0.0 {
                    return 0.0;
                }
                weight * self.idf(term) * (f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * norm))
            })
            .sum()
    }

    /// All documents with a positive score, best first (ties keep index order).
    pub fn rank(&self, query: &[(String, f64)]) -> Vec<(usize, f64)> {
        let mut scored: Vec<(usize, f64)> = (0..self.term_freqs.len())
            .map(|d| (d, self.score(d, query)))
            .filter(|(_, s)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(texts: &[&str]) -> Bm25 {
        Bm25::new(texts.iter().map(|t| tokenize(t)).collect())
    }

    #[test]
    fn tokenizer_lowercases_splits_and_drops_stop_words() {
        assert_eq!(
            tokenize("How do I set up the VPN? WireGuard-profiles, please!"),
            vec!["set", "up", "vpn", "wireguard", "profile", "please"]
        );
        assert_eq!(tokenize("policies"), vec!["policy"]);
    }

    #[test]
    fn rarer_terms_weigh_more() {
        let bm = index(&["robot robot arm", "robot leg", "robot wheel", "laser"]);
        assert!(bm.idf("laser") > bm.idf("robot"));
        assert!(bm.idf("missing") > bm.idf("laser"));
    }

    #[test]
    fn term_frequency_saturates_and_length_normalises() {
        let bm = index(&[
            "vpn",
            "vpn vpn",
            "vpn vpn vpn vpn vpn vpn vpn vpn",
            "vpn with many other words around it here today",
            "unrelated text",
        ]);
        let q = query_terms("vpn", 1.0);
        let (one, two, eight, long) = (
            bm.score(0, &q),
            bm.score(1, &q),
            bm.score(2, &q),
            bm.score(3, &q),
        );
        assert!(two > one, "more occurrences score higher");
        assert!(eight < 2.5 * two, "but the gain saturates (k1)");
        assert!(long < one, "longer documents are normalised down (b)");
        assert_eq!(bm.score(4, &q), 0.0);
    }

    #[test]
    fn known_value_matches_the_formula() {
        // Two documents, average length 2; query "a1" occurs once in doc 0 (length 2).
        let bm = Bm25::new(vec![
            vec!["a1".into(), "b1".into()],
            vec!["c1".into(), "d1".into()],
        ]);
        let idf = (1.0f64 + (2.0 - 1.0 + 0.5) / (1.0 + 0.5)).ln();
        let expected = idf * (1.0 * (K1 + 1.0)) / (1.0 + K1);
        let got = bm.score(0, &[("a1".into(), 1.0)]);
        assert!((got - expected).abs() < 1e-12, "{got} vs {expected}");
    }

    #[test]
    fn ranking_orders_by_relevance() {
        let bm = index(&[
            "The cafeteria serves lunch.",
            "Parental leave lasts twenty weeks.",
            "Leave requests go to your manager.",
        ]);
        let ranked = bm.rank(&query_terms("How long is parental leave?", 1.0));
        assert_eq!(ranked.first().map(|r| r.0), Some(1));
        assert_eq!(ranked.len(), 2);
    }

    #[test]
    fn shipped_corpus_parses_and_is_ascii() {
        assert_eq!(SOURCES.len(), 12);
        for (file, text) in SOURCES {
            assert!(text.is_ascii(), "{file} must be ASCII");
            let doc = parse_document(file, text).expect("parses");
            assert!(doc.url.starts_with("https://intranet.northwind.example/"));
            assert!(doc.paragraphs.len() >= 2, "{file}");
        }
        let corpus = Corpus::northwind();
        assert_eq!(corpus.documents().len(), 12);
        for p in corpus.passages() {
            assert!(p.text.len() > 20, "suspicious sentence split: {:?}", p.text);
        }
    }

    #[test]
    fn corpus_answers_questions_from_the_right_page() {
        let corpus = Corpus::northwind();
        let cases = [
            ("How many vacation days do I get?", "nwr-hr-0001"),
            ("How do I get a VPN profile?", "nwr-it-0003"),
            ("What is the hotel limit per night?", "nwr-fin-0008"),
            ("How long is parental leave?", "nwr-hr-0006"),
            ("When is open enrollment for benefits?", "nwr-hr-0011"),
        ];
        for (question, id) in cases {
            let ranked = corpus.rank(&query_terms(question, 1.0), |_| true);
            let top = ranked.first().expect("a match");
            let doc = &corpus.documents()[corpus.passages()[top.0].document];
            assert_eq!(doc.id, id, "{question}");
        }
    }

    #[test]
    fn sentences_split_at_terminal_punctuation_only() {
        assert_eq!(
            split_sentences("Write to security@northwind.example. It costs 3.50 dollars! Ok?"),
            vec![
                "Write to security@northwind.example.",
                "It costs 3.50 dollars!",
                "Ok?"
            ]
        );
    }
}
