// Puts an id together from its second, shard and sequence, keeping the shifted bits of the last
// second and of each shard so the hot path builds one bigint per id.
import type { Layout } from "@leaf/core";
import type { SequenceErrors } from "./errors";

/** Composes ids of one layout. */
export class IdBits {
  private readonly epochSecond: number;
  private readonly timestampShift: bigint;
  private readonly shardBits: bigint[] = [];
  private baseSecond = -1;
  private base = 0n;

  constructor(
    private readonly layout: Layout,
    private readonly errors: SequenceErrors,
  ) {
    this.epochSecond = layout.epoch / 1000;
    this.timestampShift = BigInt(layout.timestampShift);
  }

  /**
   * The id of `sequence` in `second` (Unix seconds) for `shard`.
   * @throws LeafError CLOCK_BEHIND or LAYOUT_EXHAUSTED when the layout cannot hold `second`.
   */
  compose(second: number, shard: number, sequence: number): bigint {
    if (second !== this.baseSecond) {
      const ticks = second - this.epochSecond;
      if (ticks < 0 || ticks > this.layout.maxTicks) throw this.errors.outOfLayout(second);
      this.base = BigInt(ticks) << this.timestampShift;
      this.baseSecond = second;
    }
    let bits = this.shardBits[shard];
    if (bits === undefined) {
      bits = BigInt(shard) << BigInt(this.layout.workerShift);
      this.shardBits[shard] = bits;
    }
    return this.base | bits | BigInt(sequence);
  }
}
