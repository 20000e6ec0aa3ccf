// Typed errors, and the one place a server's error replies become them (the
// twin of echomq/errors.py). Scripts answer `EMQ<CODE> message`.
export class EchoMQError extends Error {
  get name() { return this.constructor.name; }
}
export class ArgumentError extends EchoMQError {}   // EMQARG: refused, nothing changed
export class InvalidName extends ArgumentError {}   // ill-formed queue name, job id or lane
export class KindError extends InvalidName {}       // EMQKIND: a job id whose brand is not JOB
export class StaleToken extends EchoMQError {}      // EMQSTALE: the token no longer holds the lease
export class Cancelled extends EchoMQError {}       // EMQCANCELLED: cancelled while leased (dropped)
export class JobNotFound extends EchoMQError {}     // EMQNOJOB
export class WrongState extends EchoMQError {}      // EMQSTATE
export class Unavailable extends EchoMQError {}     // the server cannot be reached

const BY_CODE = {
  EMQARG: ArgumentError,
  EMQKIND: KindError,
  EMQSTALE: StaleToken,
  EMQCANCELLED: Cancelled,
  EMQNOJOB: JobNotFound,
  EMQSTATE: WrongState,
};

// Valkey and Redis 7 append ` script: <sha>, on @user_script:N.` to an
// error raised inside a script; the message is what comes before it.
export function stripTail(message) {
  const at = message.lastIndexOf(' script: ');
  return at === -1 ? message : message.slice(0, at);
}

export function translate(err) {
  if (err instanceof EchoMQError) return err;
  if (err?.name === 'ReplyError') {
    const message = stripTail(err.message);
    const Cls = BY_CODE[message.split(' ', 1)[0]];
    return Cls ? new Cls(message, { cause: err }) : err;
  }
  if (err?.message?.includes('Connection is closed') || ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT'].includes(err?.code)) {
    return new Unavailable(`Valkey unavailable: ${err.message}`, { cause: err });
  }
  return err;
}
