// Reads Java .properties text (Java Leaf's leaf.properties): `key=value`, `key: value` or
// `key value`, `#` and `!` comments, backslash line continuations and escapes, \uXXXX included.

/** One `key=value` entry and the line it started on (1-based), for error messages. */
export interface PropertyEntry {
  key: string;
  value: string;
  line: number;
}

/**
 * Parses .properties text as java.util.Properties#load does. Later entries for the same key are
 * kept too (in order): the caller decides what a repeated key means.
 */
export function parseProperties(text: string): PropertyEntry[] {
  const entries: PropertyEntry[] = [];
  const lines = text.split(/\r\n|\r|\n/);
  for (let i = 0; i < lines.length; i++) {
    const startLine = i + 1;
    let logical = stripLeading(lines[i]!);
    if (logical === "" || logical[0] === "#" || logical[0] === "!") continue;
    // A line ending in an odd number of backslashes continues on the next line.
    while (endsWithContinuation(logical) && i + 1 < lines.length) {
      logical = logical.slice(0, -1) + stripLeading(lines[++i]!);
    }
    if (endsWithContinuation(logical)) logical = logical.slice(0, -1);
    const { key, rest } = splitKey(logical);
    entries.push({ key: unescapeJava(key), value: unescapeJava(rest), line: startLine });
  }
  return entries;
}

function stripLeading(line: string): string {
  return line.replace(/^[ \t\f]+/, "");
}

function endsWithContinuation(line: string): boolean {
  let slashes = 0;
  for (let i = line.length - 1; i >= 0 && line[i] === "\\"; i--) slashes++;
  return slashes % 2 === 1;
}

/** Splits at the first unescaped `=`, `:` or whitespace (whitespace around `=`/`:` is dropped). */
function splitKey(line: string): { key: string; rest: string } {
  let i = 0;
  while (i < line.length) {
    const c = line[i]!;
    if (c === "\\") {
      i += 2;
      continue;
    }
    if (c === "=" || c === ":" || c === " " || c === "\t" || c === "\f") break;
    i++;
  }
  const key = line.slice(0, i);
  let j = i;
  while (j < line.length && /[ \t\f]/.test(line[j]!)) j++;
  if (j < line.length && (line[j] === "=" || line[j] === ":")) j++;
  while (j < line.length && /[ \t\f]/.test(line[j]!)) j++;
  return { key, rest: line.slice(j) };
}

function unescapeJava(text: string): string {
  if (!text.includes("\\")) return text;
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== "\\" || i + 1 >= text.length) {
      out += c;
      continue;
    }
    const next = text[++i]!;
    if (next === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 1, i + 5))) {
      out += String.fromCharCode(Number.parseInt(text.slice(i + 1, i + 5), 16));
      i += 4;
    } else if (next === "t") out += "\t";
    else if (next === "n") out += "\n";
    else if (next === "r") out += "\r";
    else if (next === "f") out += "\f";
    else out += next;
  }
  return out;
}
