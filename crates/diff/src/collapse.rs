//! The last change per URI (Z39.99-2014 §12.1: a Change List may list several changes of one
//! resource; a Destination applies the last): the one rule, for sequences held in memory (a
//! notification's payload, the simulator's log). The Destination's staging database
//! (`crates/destination/src/plan/staging.rs`) applies the same rule on disk for Change Lists of
//! any size, and is tested against this function.

use std::collections::HashMap;
use std::hash::Hash;

/// The items of `items` that are the last of their key, in the order of those last
/// occurrences: `a1 b1 a2` gives `b1 a2`.
pub fn last_per_key<T, K, F>(items: impl IntoIterator<Item = T>, key: F) -> Vec<T>
where
    K: Hash + Eq,
    F: Fn(&T) -> K,
{
    let mut slots: Vec<Option<T>> = Vec::new();
    let mut last: HashMap<K, usize> = HashMap::new();
    for it in items {
        if let Some(i) = last.insert(key(&it), slots.len()) {
            slots[i] = None;
        }
        slots.push(Some(it));
    }
    slots.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_of_each_key_in_the_order_of_last_occurrence() {
        let v = vec![("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2)];
        assert_eq!(last_per_key(v, |x| x.0), vec![("a", 2), ("c", 1), ("b", 2)]);
        assert!(last_per_key(Vec::<(&str, u8)>::new(), |x| x.0).is_empty());
    }
}
