/** Which series: its id, and what it pages — an endpoint, a query, a country and a language. */
export interface SeriesIdentity {
  seriesId: string;
  endpoint: string;
  query: string;
  country: string;
  lang: string;
}
