// `pnpm bench encoding`: how fast ids become strings and back, per form of @leaf/core (fixed-width
// base62, base36, Crockford base32, with a prefix, CosId's friendly form), against the decimal
// string of a bigint (`id.toString()`, `BigInt(text)`) in the same run.
import {
  FriendlyIdFormat,
  IdEncoding,
  type IdStringForm,
  layouts,
  SnowflakeGenerator,
} from "@leaf/core";
import { type BenchRow, report } from "./_report";

const COUNT = Number(process.env.BENCH_IDS ?? 1_000_000);
const ROUNDS = 5;

/** Real snowflake ids (Java Leaf's layout), made once: every row encodes the same ones. */
function leafIds(): bigint[] {
  const generator = new SnowflakeGenerator({ workerId: 619, randomSequenceStart: 0 });
  const out: bigint[] = [];
  while (out.length < COUNT) out.push(...generator.nextIds(Math.min(100_000, COUNT - out.length)));
  return out;
}

/**
 * Ids of a 53-bit layout as JS numbers: composed for the last seconds rather than generated, since
 * safe53s makes 4,096 ids a second per worker.
 */
function safeNumbers(): number[] {
  const now = layouts.safe53s.ticksAt(Date.now());
  return Array.from({ length: COUNT }, (_, i) =>
    Number(
      layouts.safe53s.compose({
        ticks: now - Math.floor(i / 4096),
        workerId: 7,
        sequence: i % 4096,
      }),
    ),
  );
}

let sink = 0;

/** Best of ROUNDS: ids per second of `run` over `count` items. */
function best(count: number, run: () => void): number {
  run(); // warm-up
  let top = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const started = performance.now();
    run();
    top = Math.max(top, count / ((performance.now() - started) / 1000));
  }
  return Math.round(top);
}

function encodeRate<T>(ids: T[], encode: (id: T) => string): number {
  return best(ids.length, () => {
    let length = 0;
    for (let i = 0; i < ids.length; i++) length += encode(ids[i]!).length;
    sink += length;
  });
}

function parseRate<T>(texts: string[], parse: (text: string) => T): number {
  return best(texts.length, () => {
    let last: T | undefined;
    for (let i = 0; i < texts.length; i++) last = parse(texts[i]!);
    if (last === undefined) sink++;
  });
}

function formRow(name: string, form: IdStringForm, ids: bigint[], decimal: number): BenchRow {
  const texts = ids.map((id) => form.encode(id));
  for (let i = 0; i < 1000; i++) {
    if (form.parse(texts[i]!) !== ids[i]) throw new Error(`${name}: round trip failed`);
  }
  const encodePerSecond = encodeRate(ids, (id) => form.encode(id));
  const parsePerSecond = parseRate(texts, (text) => form.parse(text));
  return {
    name,
    example: texts[0]!,
    encodePerSecond,
    parsePerSecond,
    encodeRatioToDecimal: Number((encodePerSecond / decimal).toFixed(2)),
  };
}

const ids = leafIds();
const decimalTexts = ids.map((id) => id.toString());
const decimalEncode = encodeRate(ids, (id) => id.toString());
const rows: BenchRow[] = [
  {
    name: "decimal: id.toString() / BigInt(text) (reference)",
    example: decimalTexts[0]!,
    encodePerSecond: decimalEncode,
    parsePerSecond: parseRate(decimalTexts, (text) => BigInt(text)),
    encodeRatioToDecimal: 1,
  },
];
for (const alphabet of ["base62", "base36", "base32"] as const) {
  rows.push(formRow(alphabet, new IdEncoding({ alphabet }), ids, decimalEncode));
}
rows.push(
  formRow(
    "base62, prefix ord_",
    new IdEncoding({ alphabet: "base62", prefix: "ord_" }),
    ids,
    decimalEncode,
  ),
  formRow(
    "friendly (layouts.leaf)",
    new FriendlyIdFormat({ layout: layouts.leaf }),
    ids,
    decimalEncode,
  ),
);

// 53-bit ids as JS numbers: encode takes the number, parseNumber gives one back.
const numbers = safeNumbers();
const base62 = new IdEncoding({ alphabet: "base62", bits: 53 });
const numberTexts = numbers.map((n) => base62.encode(n));
const numberDecimal = encodeRate(numbers, (n) => String(n));
const numberBase62 = encodeRate(numbers, (n) => base62.encode(n));
rows.push(
  {
    name: "53-bit numbers: String(n) / Number(text) (reference)",
    example: String(numbers[0]),
    encodePerSecond: numberDecimal,
    parsePerSecond: parseRate(
      numbers.map((n) => String(n)),
      (text) => Number(text),
    ),
    encodeRatioToDecimal: Number((numberDecimal / decimalEncode).toFixed(2)),
  },
  {
    name: "53-bit numbers: base62 (bits 53), parseNumber",
    example: numberTexts[0]!,
    encodePerSecond: numberBase62,
    parsePerSecond: parseRate(numberTexts, (text) => base62.parseNumber(text)),
    encodeRatioToDecimal: Number((numberBase62 / decimalEncode).toFixed(2)),
  },
);

report(
  "encoding",
  rows,
  `${COUNT.toLocaleString("en-US")} ids per row (Java Leaf's layout, worker 619; the 53-bit rows: ` +
    `layouts.safe53s), best of ${ROUNDS} runs, one process, Node ${process.version}. ` +
    "encodeRatioToDecimal: encode rate over id.toString() of the same bigint ids.",
);
if (sink === -1) console.log(sink);
