/** What every secret is replaced with wherever text leaves the process. */
export const REDACTED = '[redacted]';

// Shorter values would match ordinary text and redact it for nothing; real keys are far longer.
const MIN_SECRET_LENGTH = 4;
// A secret's beginning this long, left at the end of a cut text, is taken for the secret: a cut (ours, or a read that
// stopped at its limit) can fall inside an echoed key, and the half before it is still most of the key.
const MIN_PREFIX = 8;
// A base64 core shorter than this would match ordinary text; keys of 10 characters or more give longer cores.
const MIN_BASE64_CORE = 12;

/**
 * Replaces every secret in a text (`redact(text)`), or does so and then cuts it to `max` characters
 * (`redact.cut(text, max)`), redacting what a cut may leave of one at its end.
 */
export interface Redactor {
  (text: string): string;
  cut(text: string, max: number): string;
}

/**
 * Servers echo request headers in error bodies, in `Location`s and sometimes in 2xx pages, and not always as sent:
 * JSON-escaped (`\/`, `\u002F`), percent-encoded (either case of hex), as HTML entities, or inside base64, and in
 * any case (a logged URL lowercased whole). So each secret is matched in each of those encodings, character by
 * character (a server may escape some characters and not others), letters in either case, and as the three base64
 * cores that stand for it at any byte alignment of an encoded blob. The forms are compiled once into one pattern (and
 * one a form for what a cut leaves at a text's end), for each set of secrets;
 * everything kept from a response passes through it before it is stored or shown.
 */
export function redactor(secrets: ReadonlyArray<string | undefined>): Redactor {
  // In one order whatever the caller's: a pool's clients each redact every key of the pool, their own first.
  const values = [...new Set(secrets.filter((s): s is string => typeof s === 'string' && s.length >= MIN_SECRET_LENGTH))].sort();
  const id = JSON.stringify(values);
  const known = BUILT.get(id);
  if (known) return known;
  const made = build(values);
  BUILT.set(id, made);
  if (BUILT.size > BUILT_MAX) BUILT.delete(BUILT.keys().next().value as string);
  return made;
}

/**
 * Redactors made, by their secrets: one set of secrets is compiled once. The patterns are large (a secret in every
 * encoding), and V8 compiles a pattern at its first use, on the thread that uses it: a pool of three keys' took 0.2 s
 * (under a profiler, with one pattern for the ends of cut texts), once for each of the pool's clients (its own key first
 * made each pattern another), on the run's thread at the first answers while requests were in flight.
 */
const BUILT = new Map<string, Redactor & { warm(): void }>();
/** Redactors kept at most: a process runs few sets of secrets (a long-lived worker, one per run). */
const BUILT_MAX = 16;

function build(values: readonly string[]): Redactor & { warm(): void } {
  const forms = values
    .flatMap((value) => [[...value].map((char) => charPattern([char])), ...base64Cores(value)])
    // Longest first, so that a secret containing another is replaced whole.
    .sort((a, b) => b.length - a.length);
  if (forms.length === 0) return Object.assign((text: string) => text, { cut: (text: string, max: number) => text.slice(0, max), warm() {} });

  // Case-insensitive: what a server logs may have been lowercased whole (a URL, a header line) on its way back.
  const whole = new RegExp(forms.map((form) => form.join('')).join('|'), 'gi');
  // A pattern a form: one of them all, the forms' nested optional tails, took V8 four times as long to compile at
  // its first use (0.16 s for three keys, where these take 0.04 s together).
  const tails = forms.filter((form) => form.length > MIN_PREFIX).map((form) => new RegExp(`(?:${prefixPattern(form)})$`, 'i'));
  // Used twice on a text of nothing to redact: V8 compiles a pattern at its first use and again, to machine code, at
  // the next (regexp tier-up). Done while the run waits on its database (`warmRedactors`), not at its first answer.
  let warmed = false;
  const warm = () => {
    if (warmed) return;
    warmed = true;
    for (let time = 0; time < 2; time++) for (const pattern of [whole, ...tails]) pattern.test('-');
    whole.lastIndex = 0;
  };
  const redact = (text: string) => text.replace(whole, REDACTED);
  return Object.assign(redact, {
    warm,
    cut(text: string, max: number) {
      const kept = redact(text).slice(0, max);
      // The earliest start of a secret's beginning at the end, as one pattern of them all would find it.
      let at = -1;
      for (const tail of tails) {
        const found = tail.exec(kept);
        if (found && (at < 0 || found.index < at)) at = found.index;
      }
      return at < 0 ? kept : kept.slice(0, at) + REDACTED;
    },
  });
}

/**
 * Compiles the patterns of the redactors made (those kept: `BUILT`) and not yet warmed (20-30 ms of CPU for a key's), so that a run does it
 * while it waits on a database (docs/benchmarks.md's start-up) rather than at its first answer, when requests are in
 * flight. Redaction is the same either way.
 */
export function warmRedactors(): void {
  for (const made of BUILT.values()) made.warm();
}

/** Causes followed this deep at most: a chain that loops back on itself ends there. */
const MAX_CAUSES = 8;

/**
 * An error with every secret redacted from what is printed or stored of it — its message and stack, and those of its
 * causes (an AggregateError's errors too) — in place, so that its class, and the exit code it stands for, are kept.
 * A stage of the user's may put anything in its error (the key it was given, the environment). A string is
 * redacted; anything else is returned as it is (only its String() is ever shown, and says nothing).
 */
export function redactError(error: unknown, redact: (text: string) => string, depth = 0): unknown {
  if (typeof error === 'string') return redact(error);
  if (!(error instanceof Error) || depth > MAX_CAUSES) return error;
  let redacted: Error = error;
  for (const field of ['message', 'stack'] as const) {
    const text = error[field];
    if (typeof text !== 'string' || redact(text) === text) continue;
    try {
      Object.defineProperty(error, field, { value: redact(text), writable: true, configurable: true, enumerable: false });
    } catch {
      // A frozen error cannot be changed: an error of its own, with the redacted message, is shown instead.
      redacted = new Error(redact(error.message));
    }
  }
  if (redacted !== error) return redacted;
  if (error.cause !== undefined) {
    const cause = redactError(error.cause, redact, depth + 1);
    if (cause !== error.cause) error.cause = cause;
  }
  if (error instanceof AggregateError && Array.isArray(error.errors)) error.errors = error.errors.map((each: unknown) => redactError(each, redact, depth + 1));
  return error;
}

/** A form's first MIN_PREFIX characters or more, at the end of a text. */
function prefixPattern(form: readonly string[]): string {
  let rest = '';
  for (let i = form.length - 1; i >= MIN_PREFIX; i--) rest = `(?:${form[i]}${rest})?`;
  return form.slice(0, MIN_PREFIX).join('') + rest;
}

/**
 * The base64 of a secret depends on where in the blob it starts (which of 3 byte alignments); for each, the characters
 * made of the secret's bits alone are the same whatever surrounds it. base64url's `-` and `_` stand for `+` and `/`.
 */
function base64Cores(secret: string): string[][] {
  const bytes = Buffer.from(secret, 'utf8');
  const cores: string[][] = [];
  for (const [offset, skip] of [[0, 0], [1, 2], [2, 3]] as const) {
    const length = offset + bytes.length;
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    // Whole 6-bit characters that hold no bit of the bytes around the secret.
    const core = encoded.slice(skip, Math.floor((length * 8) / 6));
    if (core.length < MIN_BASE64_CORE) return [];
    cores.push([...core].map((char) => charPattern(char === '+' ? ['+', '-'] : char === '/' ? ['/', '_'] : [char])));
  }
  return cores;
}

const HTML_NAMES: Readonly<Record<string, readonly string[]>> = {
  '&': ['amp'], '<': ['lt'], '>': ['gt'], '"': ['quot'], "'": ['apos'], '/': ['sol'], '\\': ['bsol'], '+': ['plus'],
  '=': ['equals'], '.': ['period'], '_': ['lowbar'], ':': ['colon'], ',': ['comma'], ';': ['semi'], '!': ['excl'],
  '#': ['num'], '$': ['dollar'], '%': ['percnt'], '*': ['ast', 'midast'], '?': ['quest'], '@': ['commat'],
  '[': ['lsqb', 'lbrack'], ']': ['rsqb', 'rbrack'], '{': ['lcub', 'lbrace'], '}': ['rcub', 'rbrace'], '|': ['vert', 'verbar'],
  '^': ['Hat'], '`': ['grave'], '(': ['lpar'], ')': ['rpar'],
};

/** One character of a form (or any of its equivalents) as it may appear: literal, JSON-escaped, percent-encoded, an HTML entity. */
function charPattern(chars: readonly string[]): string {
  const alternatives = new Set<string>();
  for (const char of chars) {
    const codePoint = char.codePointAt(0) as number;
    alternatives.add(escapeRegExp(char));
    // JSON: \uXXXX for any character (a surrogate pair beyond the BMP), and the short escapes.
    alternatives.add(Array.from({ length: char.length }, (_, i) => String.raw`\\u${hex(char.charCodeAt(i), 4)}`).join(''));
    if (char === '/' || char === '"' || char === '\\') alternatives.add(String.raw`\\` + escapeRegExp(char));
    alternatives.add([...Buffer.from(char, 'utf8')].map((byte) => `%${hex(byte, 2)}`).join(''));
    alternatives.add(`&#0*${codePoint};?`);
    alternatives.add(`&#x0*${hex(codePoint, 1)};?`);
    for (const name of HTML_NAMES[char] ?? []) alternatives.add(`&${name};`);
  }
  return `(?:${[...alternatives].join('|')})`;
}

/** Hex digits of `n` (either case matches: the pattern ignores case). */
function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}
