//! Findings: rule violations reported with their position, and the bounded list that
//! collects them.

use std::fmt;

use crate::document::Position;
use crate::rules::Rule;
pub use crate::rules::Severity;

/// One rule broken at one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule.
    pub rule: &'static Rule,
    /// Where (the start of the element concerned).
    pub position: Position,
    /// What exactly is wrong.
    pub message: String,
}

impl Finding {
    /// The finding's severity (the rule's).
    pub fn severity(&self) -> Severity {
        self.rule.severity
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}[{}]: {} ({})",
            self.position, self.rule.severity, self.rule.id, self.message, self.rule.section
        )
    }
}

/// A list of findings that keeps at most a set number, counting the rest, so that a hostile
/// document with a million bad entries cannot exhaust memory.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    kept: Vec<Finding>,
    max: usize,
    dropped_errors: u64,
    dropped_warnings: u64,
}

impl Findings {
    /// A list keeping at most `max` findings.
    pub fn new(max: usize) -> Self {
        Findings {
            kept: Vec::new(),
            max,
            dropped_errors: 0,
            dropped_warnings: 0,
        }
    }

    /// Records a finding.
    pub fn push(&mut self, rule: &'static Rule, position: Position, message: impl Into<String>) {
        if self.kept.len() < self.max {
            self.kept.push(Finding {
                rule,
                position,
                message: message.into(),
            });
        } else if rule.severity == Severity::Error {
            self.dropped_errors += 1;
        } else {
            self.dropped_warnings += 1;
        }
    }

    /// Moves all findings of `other` into this list.
    pub fn extend(&mut self, other: Findings) {
        for f in other.kept {
            self.push(f.rule, f.position, f.message);
        }
        self.dropped_errors += other.dropped_errors;
        self.dropped_warnings += other.dropped_warnings;
    }

    /// The findings kept, in the order found.
    pub fn as_slice(&self) -> &[Finding] {
        &self.kept
    }

    /// Takes the findings kept, leaving the list empty (the dropped counts stay).
    pub fn take(&mut self) -> Vec<Finding> {
        std::mem::take(&mut self.kept)
    }

    /// Errors found, including those not kept.
    pub fn error_count(&self) -> u64 {
        self.kept
            .iter()
            .filter(|f| f.severity() == Severity::Error)
            .count() as u64
            + self.dropped_errors
    }

    /// Warnings found, including those not kept.
    pub fn warning_count(&self) -> u64 {
        self.kept
            .iter()
            .filter(|f| f.severity() == Severity::Warning)
            .count() as u64
            + self.dropped_warnings
    }

    /// Findings found but not kept.
    pub fn dropped(&self) -> u64 {
        self.dropped_errors + self.dropped_warnings
    }

    /// Whether any finding was recorded.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.dropped() == 0
    }

    /// Sorts the kept findings by position (stable: same position keeps the order found).
    pub fn sort(&mut self) {
        self.kept.sort_by_key(|f| f.position);
    }
}
