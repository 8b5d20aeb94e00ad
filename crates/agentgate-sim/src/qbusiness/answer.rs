//! Answers: retrieval answers with citations, creator-mode text, and the 2048-character
//! cap of `systemMessage`.
//!
//! A retrieval answer is made of the best BM25 sentences (at most [`MAX_SENTENCES`], from
//! at most [`MAX_DOCUMENTS`] documents, each scoring at least [`RELATIVE_CUTOFF`] of the
//! best). Sentences are grouped by document, best document first, and kept in reading
//! order inside a document. Each sentence is followed by ` [n]`, `n` being its document's
//! `citationNumber`; the document's `textMessageSegments` cover exactly those sentences
//! (`beginOffset` inclusive, `endOffset` exclusive, character offsets into
//! `systemMessage`, which equal byte offsets because the corpus is ASCII).
//!
//! A follow-up ranks with the current question plus the previous user message of the
//! conversation at half weight, so "and how long do I have?" still finds the page the
//! conversation is about.

use super::corpus::{Corpus, query_terms};
use super::filter::{self, AttributeFilter};
use super::wire::{SnippetExcerpt, SourceAttribution, TextSegment};

/// ChatSync's cap on `systemMessage`.
pub const MAX_SYSTEM_MESSAGE: usize = 2048;
/// Most sentences in an answer.
pub(super) const MAX_SENTENCES: usize = 3;
/// Most documents cited in an answer.
pub(super) const MAX_DOCUMENTS: usize = 3;
/// A sentence must score at least this fraction of the best one.
pub(super) const RELATIVE_CUTOFF: f64 = 0.5;
/// Weight of the previous user message's terms in a follow-up.
pub(super) const CONTEXT_WEIGHT: f64 = 0.5;
/// What the service says when nothing matches.
pub const NO_ANSWER: &str =
    "I could not find information about that in the documents I have access to.";
/// The index id reported in attributions.
pub const INDEX_ID: &str = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9";
/// The data source id reported in attributions.
pub const DATASOURCE_ID: &str = "9d8c7b6a-5f4e-4d3c-b2a1-0f9e8d7c6b5a";

/// A composed answer.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Answer {
    /// `systemMessage`.
    pub text: String,
    /// `sourceAttributions`.
    pub attributions: Vec<SourceAttribution>,
}

/// Answers `question` from the corpus; `context` is the previous user message of the
/// conversation, if any.
pub(super) fn retrieve(
    corpus: &Corpus,
    question: &str,
    context: Option<&str>,
    attribute_filter: Option<&AttributeFilter>,
) -> Answer {
    let mut terms = query_terms(question, 1.0);
    if let Some(previous) = context {
        for (term, weight) in query_terms(previous, CONTEXT_WEIGHT) {
            match terms.iter_mut().find(|(t, _)| *t == term) {
                Some((_, w)) => *w += weight,
                None => terms.push((term, weight)),
            }
        }
    }
    let ranked = corpus.rank(&terms, |doc| {
        attribute_filter.is_none_or(|f| filter::matches(f, doc))
    });
    let Some(&(_, best)) = ranked.first() else {
        return no_answer();
    };

    // Pick sentences: best first, within the cutoff, the document and sentence limits.
    let mut documents: Vec<usize> = Vec::new();
    let mut chosen: Vec<usize> = Vec::new();
    for &(passage, score) in &ranked {
        if chosen.len() == MAX_SENTENCES || score < best * RELATIVE_CUTOFF {
            break;
        }
        let doc = corpus.passages()[passage].document;
        if !documents.contains(&doc) {
            if documents.len() == MAX_DOCUMENTS {
                continue;
            }
            documents.push(doc);
        }
        chosen.push(passage);
    }

    let mut text = String::new();
    let mut attributions = Vec::new();
    for (i, &doc_index) in documents.iter().enumerate() {
        let citation = i32::try_from(i + 1).unwrap_or(i32::MAX);
        let doc = &corpus.documents()[doc_index];
        let mut sentences: Vec<usize> = chosen
            .iter()
            .copied()
            .filter(|p| corpus.passages()[*p].document == doc_index)
            .collect();
        sentences.sort_by_key(|p| corpus.passages()[*p].position);
        let mut segments = Vec::new();
        for p in &sentences {
            let sentence = &corpus.passages()[*p].text;
            let marker = format!(" [{citation}]");
            let separator = if text.is_empty() { "" } else { " " };
            if text.len() + separator.len() + sentence.len() + marker.len() > MAX_SYSTEM_MESSAGE {
                break;
            }
            text.push_str(separator);
            let begin = text.len();
            text.push_str(sentence);
            segments.push(TextSegment {
                begin_offset: begin,
                end_offset: text.len(),
                snippet_excerpt: SnippetExcerpt {
                    text: sentence.clone(),
                },
            });
            text.push_str(&marker);
        }
        if segments.is_empty() {
            continue;
        }
        let first = &corpus.passages()[sentences[0]];
        attributions.push(SourceAttribution {
            title: doc.title.clone(),
            snippet: doc
                .paragraphs
                .get(first.paragraph)
                .cloned()
                .unwrap_or_else(|| first.text.clone()),
            url: doc.url.clone(),
            citation_number: citation,
            updated_at: doc.updated_at,
            text_message_segments: segments,
            document_id: doc.id.clone(),
            index_id: INDEX_ID.into(),
            datasource_id: DATASOURCE_ID.into(),
        });
    }
    if attributions.is_empty() {
        return no_answer();
    }
    Answer { text, attributions }
}

fn no_answer() -> Answer {
    Answer {
        text: NO_ANSWER.into(),
        attributions: Vec::new(),
    }
}

/// A short generated text for `CREATOR_MODE` (no retrieval, no citations).
pub(super) fn create(question: &str, context: Option<&str>) -> String {
    let topic = truncate(question.trim(), 200);
    let mut text = format!(
        "Here is a short draft about \"{topic}\". Start with the goal and who it is for. \
         Then list the two or three points that matter most, each in one sentence. \
         Close with the next step you expect from the reader."
    );
    if let Some(previous) = context {
        text.push_str(&format!(
            " This continues our earlier topic: \"{}\".",
            truncate(previous.trim(), 200)
        ));
    }
    truncate(&text, MAX_SYSTEM_MESSAGE)
}

/// Cuts `text` to at most `max` characters: at the last sentence end or, failing that,
/// the last space that fits, adding `...` when words had to be cut.
pub(super) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max.saturating_sub(3)).collect();
    if let Some(end) = cut.rfind(['.', '!', '?'])
        && end > cut.len() / 2
    {
        return cut[..=end].to_owned();
    }
    let head = match cut.rfind(' ') {
        Some(space) if space > 0 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}...", head.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_point_at_the_cited_sentences() {
        let corpus = Corpus::northwind();
        let answer = retrieve(&corpus, "How many vacation days do I get?", None, None);
        assert!(!answer.attributions.is_empty());
        assert_eq!(answer.attributions[0].document_id, "nwr-hr-0001");
        for a in &answer.attributions {
            for s in &a.text_message_segments {
                let slice = &answer.text[s.begin_offset..s.end_offset];
                assert_eq!(slice, s.snippet_excerpt.text);
                let marker = format!(" [{}]", a.citation_number);
                assert!(answer.text[s.end_offset..].starts_with(&marker));
            }
        }
        assert!(
            answer.text.contains("25 days of paid vacation"),
            "{}",
            answer.text
        );
    }

    #[test]
    fn no_match_is_polite_and_uncited() {
        let corpus = Corpus::northwind();
        let answer = retrieve(&corpus, "quantum chromodynamics lagrangian", None, None);
        assert_eq!(answer.text, NO_ANSWER);
        assert!(answer.attributions.is_empty());
    }

    #[test]
    fn follow_up_uses_the_previous_question() {
        let corpus = Corpus::northwind();
        let alone = retrieve(&corpus, "How long does it last?", None, None);
        let follow = retrieve(
            &corpus,
            "How long does it last?",
            Some("Tell me about parental leave"),
            None,
        );
        assert_eq!(follow.attributions[0].document_id, "nwr-hr-0006");
        assert_ne!(
            alone.attributions.first().map(|a| a.document_id.clone()),
            Some("nwr-hr-0006".to_owned())
        );
    }

    #[test]
    fn truncation_is_clean() {
        let long = "Word ".repeat(1000);
        let cut = truncate(&long, MAX_SYSTEM_MESSAGE);
        assert!(cut.len() <= MAX_SYSTEM_MESSAGE);
        assert!(cut.ends_with("Word..."));
        let sentences = "This is a sentence. ".repeat(200);
        let cut = truncate(&sentences, 100);
        assert!(cut.ends_with("sentence."), "{cut}");
        assert!(create(&"x".repeat(5000), None).len() <= MAX_SYSTEM_MESSAGE);
    }
}
