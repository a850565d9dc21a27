import type { SeenKeyStore, Sighting } from './interfaces.ts';

/** Where committed dedupe keys are looked up and forgotten: the store's own tables. */
export interface KeyTable {
  /** Which of `keys` the scope holds, committed. */
  has(scope: string, keys: readonly string[]): Promise<readonly string[]>;
  /** The run's run-scoped keys go. */
  forgetRun(): Promise<void>;
}

/**
 * A run's view of the dedupe keys, whichever store holds them. What a page adds is held here until the page commits,
 * and written in its transaction: a page that never committed leaves no key behind, so re-fetching it after a crash
 * does not see its own items as seen.
 */
export function pendingKeys(runId: string, table: KeyTable): SeenKeyStore {
  const pending = new Map<string, { scope: string; key: string; runId: string | null }>();
  // Keys drained into pages that are committing: not yet in the store's tables, still seen.
  const committing = new Set<string>();
  const sightings: Sighting[] = [];
  const id = (scope: string, key: string) => `${scope}\u0000${key}`;
  const held = (scope: string, key: string) => pending.has(id(scope, key)) || committing.has(id(scope, key));
  return {
    /** `runScoped`: keys of this run only (forgotten when it finishes); otherwise kept across runs. */
    view(runScoped) {
      return {
        async seen(scope, keys) {
          const known = keys.filter((key) => held(scope, key));
          const unknown = keys.filter((key) => !held(scope, key));
          const committed = unknown.length === 0 ? [] : await table.has(scope, unknown);
          // And those held now: another page may have added one while the store was asked.
          return new Set([...known, ...keys.filter((key) => held(scope, key)), ...committed]);
        },
        add: (scope, key) => {
          pending.set(id(scope, key), { scope, key, runId: runScoped ? runId : null });
        },
        sighting: (sighting) => {
          sightings.push(sighting);
        },
      };
    },
    drain() {
      const writes = { keys: [...pending.values()], sightings: sightings.splice(0) };
      for (const key of pending.keys()) committing.add(key);
      pending.clear();
      return writes;
    },
    settled(writes) {
      for (const { scope, key } of writes.keys) committing.delete(id(scope, key));
    },
    forgetRun: () => table.forgetRun(),
  };
}
