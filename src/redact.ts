/** What every secret is replaced with wherever text leaves the process. */
export const REDACTED = '[redacted]';

// Shorter values would match ordinary text and redact it for nothing; real keys are far longer.
const MIN_SECRET_LENGTH = 4;

/**
 * Returns a function that replaces every occurrence of the given secrets in a text.
 * Servers sometimes echo request headers in error bodies, so anything we keep from a response
 * (and every message built from it) passes through this before it is stored or shown.
 */
export function redactor(secrets: ReadonlyArray<string | undefined>): (text: string) => string {
  const values = [...new Set(secrets.filter((s): s is string => typeof s === 'string' && s.length >= MIN_SECRET_LENGTH))]
    // Longest first, so that a secret containing another is replaced whole.
    .sort((a, b) => b.length - a.length);
  if (values.length === 0) return (text) => text;
  return (text) => {
    let out = text;
    for (const value of values) out = out.replaceAll(value, REDACTED);
    return out;
  };
}
