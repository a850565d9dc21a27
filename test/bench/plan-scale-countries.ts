// The 40 countries of the plan-scale benches (test/bench/plan-scale.ts, feed-window.ts): a plan is queries × these.
export const COUNTRIES = ['us', 'gb', 'de', 'fr', 'it', 'es', 'nl', 'se', 'pl', 'ca', 'au', 'br', 'mx', 'ar', 'jp', 'kr', 'in', 'id', 'tr', 'za', 'ch', 'at', 'be', 'dk', 'fi', 'no', 'ie', 'pt', 'cz', 'hu', 'ro', 'gr', 'nz', 'sg', 'my', 'ph', 'th', 'vn', 'cl', 'co'];
