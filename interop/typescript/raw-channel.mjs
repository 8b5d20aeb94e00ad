// The host's side of @modelcontextprotocol/ext-tasks 0.2.2: its `rawDispatch`.
//
// ext-tasks asks the host for a raw JSON-RPC channel on a 2026-07-28 connection,
// because the 2.x Client's codecs refuse the Tasks extension's wire shapes (a
// tools/call answered with `resultType: "task"`, the tasks/* methods). This sends
// raw requests through the already connected transport with string ids (the
// Client uses numbers) and takes their responses before the Client sees them.
export class RawChannel {
  #transport;
  #pending = new Map();
  #next = 0;

  /** Attach after `client.connect(transport)`, in front of the Client's handlers. */
  constructor(transport) {
    this.#transport = transport;
    const onmessage = transport.onmessage;
    const onclose = transport.onclose;
    transport.onmessage = (message, extra) => {
      const pending = typeof message?.id === 'string' && !('method' in message)
        ? this.#pending.get(message.id) : undefined;
      if (!pending) return onmessage?.(message, extra);
      this.#pending.delete(message.id);
      clearTimeout(pending.timer);
      pending.resolve('error' in message
        ? { kind: 'error', error: message.error }
        : { kind: 'result', result: message.result });
    };
    transport.onclose = () => {
      for (const pending of this.#pending.values()) {
        clearTimeout(pending.timer);
        pending.reject(new Error('the MCP connection closed'));
      }
      this.#pending.clear();
      onclose?.();
    };
  }

  /** ext-tasks' RawClientDispatch: (request, { signal, context }) => { kind, result | error }. */
  dispatch = (request, options = {}) => {
    const id = `raw-${++this.#next}`;
    const message = { jsonrpc: '2.0', id, method: request.method, ...(request.params ? { params: request.params } : {}) };
    const timeoutMs = options.context?.requestTimeoutMs ?? 120_000;
    return new Promise((resolve, reject) => {
      const fail = (error) => {
        if (this.#pending.delete(id)) {
          clearTimeout(timer);
          reject(error);
        }
      };
      const timer = setTimeout(() => fail(new Error(`${request.method} timed out after ${timeoutMs} ms`)), timeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
      options.signal?.addEventListener('abort', () => fail(options.signal.reason ?? new Error('aborted')), { once: true });
      // Over HTTP the transport derives MCP-Protocol-Version, Mcp-Method and Mcp-Name
      // from the `_meta` envelope ext-tasks puts in the body.
      const extra = options.context?.headers ? { headers: options.context.headers } : undefined;
      Promise.resolve(this.#transport.send(message, extra)).catch(fail);
    });
  };
}
