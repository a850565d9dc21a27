import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Fault } from './faults.ts';
import type { KeyAccount } from './plans.ts';
import { defaultBody, sendMalformed, streamOversize } from './replies.ts';
import type { LogEntry } from './types.ts';

/** One request and its answer on their way through the simulator. */
export interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  /** The endpoint's path below `/api/v1` (the whole path, outside it). */
  path: string;
  /** What the log will say of the request: filled in as it is answered. */
  entry: LogEntry;
  /** Answers with `status`, noted in the entry. */
  reply(status: number, body: unknown, headers?: Record<string, string>): void;
}

/**
 * Carries out a fault. `admitted` says whether the account already holds a reservation (random faults come
 * after admission; scripted ones replace it). Resolves to whether the request was charged. A response the fault keeps
 * open (a hang, a stalled or oversize body) is in `heldOpen` until it closes, so that closing the simulator ends it.
 */
export async function applyFault(
  fault: Fault,
  { res, entry, reply, url }: Exchange,
  account: KeyAccount,
  weight: number,
  heldOpen: Set<ServerResponse>,
  admitted = false,
): Promise<boolean> {
  const debit = () => {
    entry.charged = weight;
    // A reservation is settled by the caller; a scripted fault debits directly.
    if (!admitted) account.debited += weight;
    return true;
  };
  switch (fault.fault) {
    case 'status': {
      const charged = fault.status >= 200 && fault.status < 300;
      reply(fault.status, fault.body ?? defaultBody(fault.status), fault.headers);
      return charged && debit();
    }
    case 'redirect':
      reply(fault.status, '', { location: fault.location ?? `https://moved.example${url.pathname}${url.search}` });
      return false;
    case 'malformed':
      entry.status = 200;
      sendMalformed(res, fault.form);
      return debit();
    case 'reset': {
      const charged = fault.charged && debit();
      res.socket?.destroy();
      return charged;
    }
    case 'hang':
    case 'stall-body': {
      const charged = (fault.fault === 'stall-body' || fault.charged) && debit();
      if (fault.fault === 'stall-body') {
        entry.status = 200;
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': '100000' });
        res.write('{"data":[{"title":"partial');
      }
      heldOpen.add(res);
      await new Promise<void>((resolve) => res.once('close', resolve));
      heldOpen.delete(res);
      return charged;
    }
    case 'oversize':
      entry.status = 200;
      debit();
      heldOpen.add(res);
      await streamOversize(res, fault.bytes, fault.declareLength);
      heldOpen.delete(res);
      return true;
    case 'delay':
      return false;
  }
}
