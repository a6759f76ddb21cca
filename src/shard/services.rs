//! The services a shard carries without knowing them: the group coordinator, the controller
//! (shard 0), and whatever comes next. Services sit above the shard and use it; the shard holds
//! their per-core state in typed slots, set when the shard starts, so that the dependency runs
//! one way only.
//!
//! Lives on: its shard, like the shard itself.

use ferrite_shards::partition::Partition;
use futures::future::LocalBoxFuture;
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::rc::Rc;

/// One value per type.
#[derive(Default)]
pub struct Services {
    slots: RefCell<Vec<(TypeId, Rc<dyn Any>)>>,
    observers: RefCell<Vec<Rc<dyn PartitionObserver>>>,
}

impl Services {
    /// Installs `service`; a second one of the same type replaces the first.
    pub fn insert<T: Any>(&self, service: Rc<T>) {
        let mut slots = self.slots.borrow_mut();
        slots.retain(|(id, _)| *id != TypeId::of::<T>());
        slots.push((TypeId::of::<T>(), service));
    }

    /// The service of type `T`, if this shard has one.
    pub fn get<T: Any>(&self) -> Option<Rc<T>> {
        self.slots
            .borrow()
            .iter()
            .find(|(id, _)| *id == TypeId::of::<T>())
            .and_then(|(_, s)| s.clone().downcast::<T>().ok())
    }

    /// Asks `observer` to be told of the partitions of its topic as the shard opens them.
    pub fn observe(&self, observer: Rc<dyn PartitionObserver>) {
        self.observers.borrow_mut().push(observer);
    }

    /// The observers of `topic`.
    pub(super) fn observers_of(&self, topic: &str) -> Vec<Rc<dyn PartitionObserver>> {
        self.observers
            .borrow()
            .iter()
            .filter(|o| o.topic() == topic)
            .cloned()
            .collect()
    }
}

/// A service that keeps state built from a topic's partitions (the group coordinator reads
/// `__consumer_offsets`), told when the shard opens one and when this broker's leadership of
/// one changes. The partition is served only once `opened` has returned.
pub trait PartitionObserver {
    /// The topic it observes.
    fn topic(&self) -> &str;

    /// A partition just opened here (`leads`: this broker is its leader), of a topic with
    /// `partitions` partitions.
    fn opened<'a>(
        &'a self,
        partition: &'a Rc<Partition>,
        leads: bool,
        partitions: usize,
    ) -> LocalBoxFuture<'a, Result<(), String>>;

    /// This broker started (`leads`) or stopped leading an open partition.
    fn leadership_changed<'a>(
        &'a self,
        partition: &'a Rc<Partition>,
        leads: bool,
        partitions: usize,
    ) -> LocalBoxFuture<'a, Result<(), String>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_has_one_slot() {
        let services = Services::default();
        assert!(services.get::<String>().is_none());
        services.insert(Rc::new("a".to_string()));
        services.insert(Rc::new(7u32));
        services.insert(Rc::new("b".to_string()));
        assert_eq!(*services.get::<String>().unwrap(), "b");
        assert_eq!(*services.get::<u32>().unwrap(), 7);
    }
}
