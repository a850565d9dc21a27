import { COUNTRY_CODES, COUNTRY_HINTS, LANGUAGE_CODES, LANGUAGE_HINTS } from './iso-codes.ts';

/**
 * Which country and language codes are accepted beyond ISO. The contract only says "lower-case two-letter
 * country code" and "lower-case language code" and lists no values, so we hold requests to the standards
 * and let a user whose engine accepts more (Google's `iw`, Kosovo's `xk`) say so explicitly.
 */
export interface AllowedCodes {
  extraCountries?: readonly string[] | undefined;
  extraLangs?: readonly string[] | undefined;
}

/** `null` when valid; otherwise what is wrong and what would be valid. */
export function checkCountry(code: string, allow: AllowedCodes = {}): string | null {
  if (allow.extraCountries?.includes(code)) return null;
  if (!/^[a-z]{2}$/.test(code)) {
    return `"${clip(code)}" is not a two-letter country code; use an ISO 3166-1 alpha-2 code such as "us", "gb" or "de"`;
  }
  if (COUNTRY_CODES.has(code)) return null;
  const hint = COUNTRY_HINTS[code];
  return (
    `"${code}" is not an ISO 3166-1 alpha-2 country code` +
    (hint ? `; did you mean "${hint}"?` : '; use a code such as "us", "gb" or "de"') +
    ` (an engine-specific code can be allowed with extraCountries: ["${code}"])`
  );
}

// language, then an optional 4-letter script, then an optional region (2 letters or a 3-digit UN M49 area).
const LANG_TAG = /^([a-z]{2})(?:-([a-z]{4}))?(?:-([a-z]{2}|\d{3}))?$/;

export function checkLang(code: string, allow: AllowedCodes = {}): string | null {
  if (allow.extraLangs?.includes(code)) return null;
  const escape = ` (an engine-specific code can be allowed with extraLangs: ["${clip(code)}"])`;
  const match = LANG_TAG.exec(code);
  if (!match) {
    return (
      `"${clip(code)}" is not a language code; use ISO 639-1 ("en"), optionally with a script or region ` +
      `("zh-hans", "pt-br", "es-419")` +
      escape
    );
  }
  const [, language = '', , region] = match;
  if (!LANGUAGE_CODES.has(language)) {
    const hint = LANGUAGE_HINTS[language];
    return `"${language}" is not an ISO 639-1 language code` + (hint ? `; did you mean "${hint}"?` : '') + escape;
  }
  if (region && /^[a-z]{2}$/.test(region) && !COUNTRY_CODES.has(region)) {
    return `"${region}" in "${code}" is not an ISO 3166-1 region` + escape;
  }
  return null;
}

// A user's typo can be anything, including something huge: keep messages readable.
function clip(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}
