//! Forged WireGuard messages, as an attacker who knows only a gateway's public key builds them
//! (the WireGuard paper, §5.4.2 and §5.4.4-5.4.7): handshake initiations whose mac1 is valid,
//! with a mac2 made from a cookie the gateway handed out, and the opening of its cookie replies.
//! Plus what sending them takes: a small seeded generator for the random parts, and a pacer.

use blake2::{
    Blake2s256, Blake2sMac, Digest,
    digest::{FixedOutput, KeyInit, Update, consts::U16},
};
use chacha20poly1305::{AeadInPlace, XChaCha20Poly1305, XNonce};

/// Message sizes: handshake initiation, handshake response, cookie reply, and the smallest data
/// message (header and tag around an empty payload: a keepalive).
pub const INIT_LEN: usize = 148;
pub const RESPONSE_LEN: usize = 92;
pub const COOKIE_REPLY_LEN: usize = 64;
pub const DATA_MIN_LEN: usize = 32;
/// Where mac1 and mac2 start in an initiation.
const MAC1_AT: usize = 116;
const MAC2_AT: usize = 132;

/// A cookie: what mac2 is keyed with.
pub type Cookie = [u8; 16];

/// keyed-BLAKE2s with a 16-byte output over the concatenation of `parts`.
fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    let mut m = <Blake2sMac<U16> as KeyInit>::new_from_slice(key).expect("a key of 1 to 32 bytes");
    for p in parts {
        m.update(p);
    }
    m.finalize_fixed().into()
}

/// BLAKE2s-256(label ‖ key).
fn hash(label: &[u8], key: &[u8; 32]) -> [u8; 32] {
    let mut h = Blake2s256::new();
    Digest::update(&mut h, label);
    Digest::update(&mut h, key);
    h.finalize().into()
}

/// What the attacker derives from a responder's public key.
#[derive(Clone)]
pub struct Responder {
    mac1_key: [u8; 32],
    cookie_key: [u8; 32],
}

impl Responder {
    /// The responder with static public key `public`.
    pub fn new(public: &[u8; 32]) -> Responder {
        Responder {
            mac1_key: hash(b"mac1----", public),
            cookie_key: hash(b"cookie--", public),
        }
    }

    /// A handshake initiation with sender index `sender`, the rest of its body (ephemeral key,
    /// encrypted static key and timestamp) filled by `rng`, a valid mac1 and, given a cookie, a
    /// valid mac2 (else zeros).
    pub fn initiation(
        &self,
        sender: u32,
        rng: &mut Rng,
        cookie: Option<&Cookie>,
    ) -> [u8; INIT_LEN] {
        let mut m = [0u8; INIT_LEN];
        m[0] = 1;
        m[4..8].copy_from_slice(&sender.to_le_bytes());
        rng.fill(&mut m[8..MAC1_AT]);
        let mac1 = self.mac1(&m);
        m[MAC1_AT..MAC2_AT].copy_from_slice(&mac1);
        if let Some(c) = cookie {
            set_mac2(&mut m, c);
        }
        m
    }

    /// The mac1 an initiation must carry (over its first 116 bytes).
    pub fn mac1(&self, init: &[u8; INIT_LEN]) -> [u8; 16] {
        mac(&self.mac1_key, &[&init[..MAC1_AT]])
    }

    /// The cookie in `reply`, a cookie reply answering a message whose mac1 was `mac1`; `None`
    /// if it is not one or does not open.
    pub fn open_cookie(&self, reply: &[u8], mac1: &[u8; 16]) -> Option<Cookie> {
        if reply.len() != COOKIE_REPLY_LEN || reply[..4] != [3, 0, 0, 0] {
            return None;
        }
        let cipher = <XChaCha20Poly1305 as chacha20poly1305::KeyInit>::new(&self.cookie_key.into());
        let mut cookie: Cookie = reply[32..48].try_into().ok()?;
        cipher
            .decrypt_in_place_detached(
                XNonce::from_slice(&reply[8..32]),
                mac1,
                &mut cookie,
                reply[48..64].into(),
            )
            .ok()?;
        Some(cookie)
    }
}

/// Puts the mac2 made from `cookie` on initiation `init` (over its first 132 bytes).
pub fn set_mac2(init: &mut [u8; INIT_LEN], cookie: &Cookie) {
    let mac2 = mac(cookie, &[&init[..MAC2_AT]]);
    init[MAC2_AT..].copy_from_slice(&mac2);
}

/// The receiver index of a cookie reply or data message (bytes 4..8).
pub fn receiver(msg: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(msg.get(4..8)?.try_into().ok()?))
}

/// Whether `d` is one WireGuard data message: type 4, at least 32 bytes, and not a UDP GSO batch
/// of several as a capture on a veth sees one (such a batch repeats the first message's type and
/// receiver index at the start of each segment; ciphertext does so by chance once in 2^64).
pub fn is_data(d: &[u8]) -> bool {
    d.len() >= DATA_MIN_LEN
        && d[..4] == [4, 0, 0, 0]
        && !d[DATA_MIN_LEN..].windows(8).any(|w| w == &d[..8])
}

/// SplitMix64: fast, seeded, good enough for random bytes that only have to look like noise.
pub struct Rng(u64);

impl Rng {
    /// A generator with this seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A seed from the clock (printed by the tests, to replay a run).
    pub fn seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x5eed, |d| d.as_nanos() as u64)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.fill(&mut v);
        v
    }
}

/// Spreads sends at a steady rate: [`Pacer::due`] says how many to send now.
pub struct Pacer {
    rate: u64,
    start: std::time::Instant,
    done: u64,
}

impl Pacer {
    /// `rate` per second, from now.
    pub fn new(rate: u64) -> Pacer {
        Pacer {
            rate,
            start: std::time::Instant::now(),
            done: 0,
        }
    }

    /// How many to send now: the backlog, at most 10 ms worth at once (a sender that fell
    /// behind catches up in steps); sleeps 1 ms first when nothing is due (fewer wake-ups: the
    /// sender's own CPU is taken from what it attacks on a small machine).
    pub fn due(&mut self) -> u64 {
        let expected = |p: &Pacer| (p.start.elapsed().as_secs_f64() * p.rate as f64) as u64;
        if expected(self) <= self.done {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let n = expected(self)
            .saturating_sub(self.done)
            .min((self.rate / 100).max(1));
        self.done += n;
        n
    }
}
