// A seeded pseudo-random generator (mulberry32 over a 32-bit state, seeded through splitmix32), so
// that one seed always draws the same schedule. Not for anything but test schedules.

/** Draws numbers from a seed; the same seed gives the same sequence everywhere. */
export class Prng {
  private state: number;

  /** `seed`: any whole number; `salt` mixes in a name (a family), so each gets its own sequence. */
  constructor(seed: number, salt = "") {
    if (!Number.isSafeInteger(seed) || seed < 0) {
      throw new Error(`[leaf] [nemesis] a seed is a whole number from 0 to 2^53 - 1, got ${seed}`);
    }
    let h = mix32((seed % 0x1_0000_0000) ^ Math.floor(seed / 0x1_0000_0000));
    for (let i = 0; i < salt.length; i++) h = mix32(h ^ salt.charCodeAt(i));
    this.state = h;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 0x1_0000_0000;
  }

  /** A whole number in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** One element of `items` (not empty). */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("[leaf] [nemesis] pick() from an empty list");
    return items[Math.floor(this.next() * items.length)]!;
  }
}

function mix32(x: number): number {
  let z = (x + 0x9e3779b9) | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}
