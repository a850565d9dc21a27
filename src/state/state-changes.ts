/**
 * What a page changed in a series' stage states, so that its commit writes that and not the whole state: a series'
 * dedupe keys and ranks grow with every page, and writing them whole made a series' commits quadratic in its length.
 *
 * A stage changes its state through a view that notes the paths it sets or deletes (records are followed key by
 * key; an array, and everything inside it, counts as one value). An object assigned into the state is stored as a
 * copy of its JSON: the state is data the runner holds, so that a change made through a reference the stage kept
 * would not reach memory without reaching the file either — what a resumed series gets is what memory had.
 *
 * A change is `[path, value]`, or `[path]` for a deleted key; a page's changes are `{ stage: change[] }` as JSON.
 */

type JsonRecord = Record<string, unknown>;
export type StateChange = [path: string[], value?: unknown];
export type StateChanges = Record<string, StateChange[]>;

/** Paths changed since the last `take`: a node marked whole covers everything below it. */
interface ChangeNode {
  whole: boolean;
  below: Map<string, ChangeNode> | undefined;
}

const isObject = (value: unknown): value is object => value !== null && typeof value === 'object';

/** JSON data with records of a null prototype: keys are arbitrary text ("__proto__" included). */
export function plainRecords(value: unknown): unknown {
  if (!isObject(value)) return value;
  if (Array.isArray(value)) return value.map(plainRecords);
  const out = Object.create(null) as JsonRecord;
  for (const [key, inner] of Object.entries(value)) out[key] = plainRecords(inner);
  return out;
}

/** A copy of what JSON keeps of a value (what a resumed series would get back). */
const jsonCopy = (value: object): unknown => {
  const text = JSON.stringify(value);
  return text === undefined ? undefined : plainRecords(JSON.parse(text));
};

/** One stage's state in one series, as the stage sees it (a view that notes changes) and as the runner writes it. */
export function trackedState(root: object) {
  const changes: ChangeNode = { whole: false, below: undefined };
  const views = new WeakMap<object, object>();

  /** Notes `path` (and `key` below it, when given) as changed. */
  const mark = (path: readonly string[], key?: string) => {
    let node = changes;
    const step = (k: string) => {
      node.below ??= new Map();
      let next = node.below.get(k);
      if (!next) {
        next = { whole: false, below: undefined };
        node.below.set(k, next);
      }
      node = next;
    };
    for (const k of path) {
      if (node.whole) return;
      step(k);
    }
    if (key !== undefined) {
      if (node.whole) return;
      step(key);
    }
    node.whole = true;
    node.below = undefined;
  };

  /** `whole`: inside an array, where any change is the array's (its path is `path`). */
  const view = (target: object, path: readonly string[], whole: boolean): object => {
    let proxy = views.get(target);
    if (proxy) return proxy;
    const inArray = whole || Array.isArray(target);
    // Inside an array every change is the array's.
    const changed = inArray ? () => mark(path) : (key: string) => mark(path, key);
    proxy = new Proxy(target, {
      // On every read and write of a stage's hot path (a rank, a seen key): kept to plain property access.
      get(t, key) {
        const value = (t as Record<PropertyKey, unknown>)[key];
        return typeof value === 'object' && value !== null && typeof key === 'string' ? view(value, inArray ? path : [...path, key], inArray) : value;
      },
      set(t, key, value: unknown) {
        if (typeof key === 'string') changed(key);
        (t as Record<PropertyKey, unknown>)[key] = typeof value === 'object' && value !== null && typeof key === 'string' ? jsonCopy(value) : value;
        return true;
      },
      deleteProperty(t, key) {
        if (typeof key === 'string') changed(key);
        return Reflect.deleteProperty(t, key);
      },
      defineProperty(t, key, descriptor) {
        if (typeof key === 'string') changed(key);
        return Reflect.defineProperty(t, key, 'value' in descriptor && isObject(descriptor.value) ? { ...descriptor, value: jsonCopy(descriptor.value) } : descriptor);
      },
    });
    views.set(target, proxy);
    return proxy;
  };

  return {
    /** The state as the stage changes it. */
    view: view(root, [], false),
    /** The state itself, for a snapshot. */
    root,
    /** Marks the whole state as changed (a new one, not yet written). */
    markAll(): void {
      mark([]);
    },
    /** The changes since the last call, as `[path, value]` pairs (`[path]` for a deleted key), and forgets them. */
    take(): StateChange[] {
      const out: StateChange[] = [];
      const walk = (node: ChangeNode, path: string[], value: unknown, present: boolean) => {
        if (node.whole) {
          out.push(present && value !== undefined ? [path, value] : [path]);
          return;
        }
        for (const [key, below] of node.below ?? []) {
          const has = present && isObject(value) && Object.hasOwn(value, key);
          walk(below, [...path, key], has ? (value as JsonRecord)[key] : undefined, has);
        }
      };
      walk(changes, [], root, true);
      changes.whole = false;
      changes.below = undefined;
      return out;
    },
  };
}

export type TrackedState = ReturnType<typeof trackedState>;

/**
 * A series' states as committed: the snapshot, then each page's changes in order. Hostile input (a damaged file)
 * is refused with what is wrong, never applied half-way to an object's prototype.
 */
export function applyStateChanges(snapshot: unknown, pages: readonly unknown[]): Record<string, object> {
  const states = (isObject(snapshot) && !Array.isArray(snapshot) ? plainRecords(snapshot) : Object.create(null)) as JsonRecord;
  for (const changes of pages) {
    if (!isObject(changes) || Array.isArray(changes)) throw new Error('a page of stage state changes is not a record of stages');
    for (const [stage, list] of Object.entries(changes)) {
      if (!Array.isArray(list)) throw new Error(`the stage state changes of "${stage}" are not a list`);
      for (const change of list as unknown[]) {
        if (!Array.isArray(change) || !Array.isArray(change[0]) || !(change[0] as unknown[]).every((key) => typeof key === 'string') || change.length > 2) {
          throw new Error(`a stage state change of "${stage}" is not [path, value] with a path of keys`);
        }
        apply(states, [stage, ...(change[0] as string[])], change.length === 2, change[1]);
      }
    }
  }
  return states as Record<string, object>;
}

function apply(states: JsonRecord, path: readonly string[], present: boolean, value: unknown): void {
  let parent = states;
  for (const key of path.slice(0, -1)) {
    let next = parent[key];
    if (!isObject(next) || Array.isArray(next)) {
      next = Object.create(null) as JsonRecord;
      parent[key] = next;
    }
    parent = next as JsonRecord;
  }
  const last = path[path.length - 1] as string;
  if (present) parent[last] = plainRecords(value);
  else delete parent[last];
}
