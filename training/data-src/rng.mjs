// Seeded randomness so `prepare-data.mjs` writes the same files on every run.

export function createRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    // mulberry32
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n) => Math.floor(next() * n);
  const pick = (xs) => xs[int(xs.length)];
  const shuffle = (xs) => {
    const out = xs.slice();
    for (let i = out.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  };
  const sample = (xs, k) => shuffle(xs).slice(0, k);
  const chance = (p) => next() < p;
  return { next, int, pick, shuffle, sample, chance };
}

/** Stable 32-bit hash of a string (FNV-1a): split membership that never depends on order. */
export function hash32(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** True for about `fraction` of keys, always the same ones. */
export function inSplit(key, fraction, salt = "val") {
  return hash32(`${salt}:${key}`) / 4294967296 < fraction;
}
