//! The service's changes against a store that fails or stalls: a failed save leaves the IPAM
//! as it was, reads never wait for a save nor see an unsaved change.

use std::sync::{Arc, Mutex, mpsc};

use super::*;
use crate::{
    State, cluster_id,
    store::{StoreError, configmap::DEFAULT_NAME},
};

/// What the test store holds and how its next saves go.
#[derive(Default)]
struct Shared {
    saved: Option<State>,
    fail: bool,
    /// When set, a save waits for a message on it before going on.
    gate: Option<mpsc::Receiver<()>>,
}

#[derive(Clone, Default)]
struct TestStore(Arc<Mutex<Shared>>);

impl TestStore {
    fn with<T>(&self, f: impl FnOnce(&mut Shared) -> T) -> T {
        f(&mut self.0.lock().unwrap())
    }
}

impl Store for TestStore {
    fn load(&mut self) -> Result<Option<State>, StoreError> {
        Ok(self.with(|s| s.saved.clone()))
    }

    fn save(&mut self, state: &State) -> Result<(), StoreError> {
        if let Some(gate) = self.with(|s| s.gate.take()) {
            gate.recv().unwrap();
        }
        self.with(|s| {
            if s.fail {
                return Err(StoreError::Conflict {
                    configmap: format!("liqo/{DEFAULT_NAME}"),
                    expected: "7".into(),
                });
            }
            s.saved = Some(state.clone());
            Ok(())
        })
    }

    fn describe(&self) -> String {
        "test".into()
    }
}

fn open(store: &TestStore) -> Service {
    let config = Config::new(
        "10.200.0.0/16".parse().unwrap(),
        "10.96.0.0/12".parse().unwrap(),
    );
    Service::open(config, Overrides::default(), Box::new(store.clone())).unwrap()
}

fn remap(ipam: &mut Ipam, peer: &str) -> Result<(ipnet::Ipv4Net, ipnet::Ipv4Net), Error> {
    ipam.acquire(
        &cluster_id(peer).unwrap(),
        "10.200.0.0/16".parse().unwrap(),
        "10.70.0.0/16".parse().unwrap(),
    )
}

#[test]
fn a_failed_save_leaves_the_ipam_and_the_store_as_they_were() {
    let store = TestStore::default();
    let s = open(&store);
    assert_eq!(s.location(), "test");
    s.mutate(|i| remap(i, "milan")).unwrap();
    let before = s.read(Ipam::state);
    // What a remap of turin gives when nothing failed in between.
    let expected = remap(&mut s.read(Ipam::clone), "turin").unwrap();

    store.with(|st| st.fail = true);
    let e = s.mutate(|i| remap(i, "turin")).unwrap_err();
    assert!(
        matches!(&e, ServiceError::Store(StoreError::Conflict { configmap, .. }) if configmap == "liqo/liqo-ipam-state"),
        "{e:?}"
    );
    let e = s
        .mutate(|i| i.release(&cluster_id("milan").unwrap()))
        .unwrap_err();
    assert!(matches!(e, ServiceError::Store(_)), "{e:?}");
    let change = Overrides {
        reserved: Some(vec!["10.202.0.0/16".parse().unwrap()]),
        ..Overrides::default()
    };
    assert!(matches!(
        s.reconfigure(&change),
        Err(ServiceError::Store(_))
    ));
    assert_eq!(s.read(Ipam::state), before, "the IPAM is as it was");
    assert_eq!(store.with(|st| st.saved.clone()), Some(before.clone()));
    assert!(s.read(|i| i.peer(&cluster_id("turin").unwrap()).is_err()));

    // Saving works again: the change is the one it would have been.
    store.with(|st| st.fail = false);
    assert_eq!(s.mutate(|i| remap(i, "turin")).unwrap(), expected);
    assert_eq!(store.with(|st| st.saved.clone()), Some(s.read(Ipam::state)));
}

#[test]
fn a_refused_change_saves_nothing() {
    let store = TestStore::default();
    let s = open(&store);
    let before = s.read(Ipam::state);
    store.with(|st| st.saved = None);
    let e = s
        .mutate(|i| i.release(&cluster_id("nobody").unwrap()))
        .unwrap_err();
    assert!(
        matches!(e, ServiceError::Ipam(Error::UnknownPeer(_))),
        "{e:?}"
    );
    assert_eq!(s.read(Ipam::state), before);
    assert_eq!(store.with(|st| st.saved.clone()), None, "nothing saved");
}

#[test]
fn reads_never_wait_for_a_save_nor_see_an_unsaved_change() {
    let store = TestStore::default();
    let s = open(&store);
    let (go, gate) = mpsc::channel();
    store.with(|st| st.gate = Some(gate));
    let writer = {
        let s = s.clone();
        std::thread::spawn(move || s.mutate(|i| remap(i, "milan")))
    };
    // The save has started (the gate is taken) and waits: reads still answer, without milan.
    while store.with(|st| st.gate.is_some()) {
        std::thread::yield_now();
    }
    assert_eq!(s.read(|i| i.peers().count()), 0);
    go.send(()).unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(s.read(|i| i.peers().count()), 1);
}

#[tokio::test]
async fn a_change_from_async_code_runs_on_the_blocking_pool() {
    let store = TestStore::default();
    let s = open(&store);
    let worker = std::thread::current().id();
    let ran_on = s
        .mutate_async(|i| {
            remap(i, "milan")?;
            Ok(std::thread::current().id())
        })
        .await
        .unwrap();
    assert_ne!(ran_on, worker, "not on the runtime's thread");
    assert_eq!(store.with(|st| st.saved.clone()), Some(s.read(Ipam::state)));
}
