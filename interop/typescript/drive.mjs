// Drives agentgate with third-party TypeScript MCP clients (not ours, not rmcp).
//
//   node drive.mjs CLIENT --url http://127.0.0.1:PORT/mcp
//   node drive.mjs CLIENT --stdio PROGRAM [ARG ...]
//
// CLIENT is one of:
//   sdk-legacy  @modelcontextprotocol/sdk 1.32.2: protocol 2025-11-25, no tasks;
//               elicitation inline, then agentgate's `task_status` / `task_cancel`
//               tools for work that outlives the call
//   ext-tasks   @modelcontextprotocol/client 2.4.0 with @modelcontextprotocol/ext-tasks
//               0.2.2, the official requester of the tasks extension: protocol
//               2026-07-28, tasks/get, tasks/update, tasks/cancel
//
// Runs the four scenarios of interop/python/drive.py (qbusiness, approval, copilot,
// cancel) and prints one JSON line per scenario on stdout, in the same shape, for
// crates/agentgate/tests/external/interop.rs. Over stdio the server gets this process's
// environment (the emulators' settings): both SDKs pass only a few variables by default.
import process from 'node:process';

const TICKET_PLUGIN_ID = '7f1c2d3e-4b5a-4c6d-8e9f-0a1b2c3d4e5f';
const QUESTION = { query: 'Where is the Berlin office?' };
const TICKET = { query: 'Open a ticket: my laptop does not boot', plugin_id: TICKET_PLUGIN_ID };
const FINISHES = { owner: 'acme', repo: 'widgets', issue_number: 1 };
const SLOW = { owner: 'acme', repo: 'widgets', issue_number: 5 };
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
// Generous: the emulated agent finishes in seconds; this only bounds a hang.
const TIMEOUT_MS = 120_000;

const emit = (scenario, fields) => console.log(JSON.stringify({ scenario, ...fields }));

/** Accept a form as proposed: every field's default. */
function defaultsOf(schema = {}) {
  const content = {};
  for (const [key, property] of Object.entries(schema.properties ?? {})) {
    if (property.default !== undefined) content[key] = property.default;
  }
  return content;
}

function parseArgs(argv) {
  const [client, how, ...rest] = argv;
  if (!['sdk-legacy', 'ext-tasks'].includes(client) || !['--url', '--stdio'].includes(how) || rest.length === 0) {
    console.error('usage: node drive.mjs sdk-legacy|ext-tasks --url URL | --stdio PROGRAM [ARG ...]');
    process.exit(2);
  }
  return how === '--url'
    ? { client, url: rest[0] }
    : { client, stdio: { command: rest[0], args: rest.slice(1), env: { ...process.env }, stderr: 'inherit' } };
}

// --- @modelcontextprotocol/sdk 1.32.2, legacy (2025-11-25) -------------------------------

async function sdkLegacy(where) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { ElicitRequestSchema, CallToolResultSchema } = await import('@modelcontextprotocol/sdk/types.js');

  const forms = [];
  const client = new Client({ name: 'agentgate-interop', version: '1' }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    if (request.params.mode === 'url') return { action: 'decline' };
    forms.push(request.params.message);
    return { action: 'accept', content: defaultsOf(request.params.requestedSchema) };
  });
  const transport = where.url
    ? new StreamableHTTPClientTransport(new URL(where.url))
    : new StdioClientTransport(where.stdio);
  // 1.x keeps the negotiated version to itself: read it off the initialize result.
  let protocol;
  let handler;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => handler && ((message, extra) => {
      if (message?.result?.protocolVersion && message.result.serverInfo) protocol = message.result.protocolVersion;
      return handler(message, extra);
    }),
    set: (h) => { handler = h; },
  });
  await client.connect(transport);

  const call = (name, args) => client.callTool({ name, arguments: args }, CallToolResultSchema, {
    timeout: TIMEOUT_MS, resetTimeoutOnProgress: true, maxTotalTimeout: 5 * TIMEOUT_MS,
  });
  /** `task_status` with a long poll until the task ends. */
  async function follow(taskId) {
    for (let i = 0; i < 120; i++) {
      const status = await call('task_status', { task_id: taskId, wait_seconds: 5 });
      const task = status.structuredContent ?? {};
      if (status.isError || TERMINAL.has(task.status)) return task;
    }
    throw new Error(`task ${taskId} did not end`);
  }
  async function run(scenario, tool, args, cancel = false) {
    forms.length = 0;
    const inline = await call(tool, args);
    const taskId = inline._meta?.['io.agentgate/taskId'] ?? null;
    const fields = { inline };
    if (taskId && cancel) fields.cancelAnswer = await call('task_cancel', { task_id: taskId });
    if (taskId) {
      const task = await follow(taskId);
      Object.assign(fields, { status: task.status, statusMessage: task.statusMessage, result: task.result ?? null });
    } else {
      Object.assign(fields, { status: 'completed', result: inline });
    }
    emit(scenario, { client: 'sdk-legacy', protocol, asTask: false, taskId, inputRequests: forms.length, ...fields });
  }

  await run('qbusiness', 'QBusinessQueryTool', QUESTION);
  await run('approval', 'QBusinessQueryTool', TICKET);
  await run('copilot', 'assign_copilot_to_issue', FINISHES);
  await run('cancel', 'assign_copilot_to_issue', SLOW, true);
  if (where.url) await transport.terminateSession();
  await client.close();
}

// --- @modelcontextprotocol/client 2.x + ext-tasks 0.2.2 (2026-07-28, tasks) -----------

async function extTasks(where) {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
  const { createTaskSessionFromClient, createApplicationInputHandler, resultFromTaskOutcome } =
    await import('@modelcontextprotocol/ext-tasks/client');
  const { RawChannel } = await import('./raw-channel.mjs');

  const clientInfo = { name: 'agentgate-interop', version: '1' };
  const capabilities = { elicitation: { form: {} } };
  // The client's default is 'legacy' (initialize at 2025-11-25): pin the tasks era.
  const client = new Client(clientInfo, { capabilities, versionNegotiation: { mode: { pin: '2026-07-28' } } });
  // A subclass probes server/discover on its own process; the base class would
  // spawn a second server just for the probe.
  class Stdio extends StdioClientTransport {}
  const transport = where.url ? new StreamableHTTPClientTransport(new URL(where.url)) : new Stdio(where.stdio);
  await client.connect(transport, { timeout: 30_000 });
  const protocol = client.getNegotiatedProtocolVersion();
  const channel = new RawChannel(transport);

  const forms = [];
  const session = createTaskSessionFromClient(client, {
    endpointId: 'agentgate',
    rawDispatch: channel.dispatch,
    v2RequestFraming: { protocolVersion: protocol, clientInfo, clientCapabilities: capabilities },
    onInputRequest: createApplicationInputHandler({
      elicitation: async (request) => {
        if (request.params.mode === 'url') return { action: 'decline' };
        forms.push(request.params.message);
        return { action: 'accept', content: defaultsOf(request.params.requestedSchema) };
      },
      sampling: async () => { throw new Error('this client does not sample'); },
      roots: async () => ({ roots: [] }),
    }),
    onError: (error) => console.error('[ext-tasks]', error.message),
  });

  async function run(scenario, tool, args, cancel = false) {
    forms.length = 0;
    const execution = await session.callTool(tool, args, { task: { preference: 'prefer' }, requestTimeoutMs: TIMEOUT_MS });
    const taskId = execution.handle?.taskId ?? null;
    const seen = [];
    const onEvent = (event) => { if (event.type === 'task') seen.push(event.task.status); };
    let status; let statusMessage; let result = null;
    let before = null;
    if (cancel) {
      // Cancel while the agent works: once it has opened its pull request.
      const task = session.task(taskId);
      for (let i = 0; i < 600 && before === null; i++) {
        const view = await task.snapshot();
        if ((view.statusMessage ?? '').includes('opened pull request')) before = view.statusMessage;
        else await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const settled = execution.settle({ onEvent });
      await execution.cancel();
      await settled;
      // ext-tasks settles on the server's acknowledgement; the task is cancelled once
      // its running step stops, so read it until it ends.
      for (let i = 0; i < 240; i++) {
        const view = await task.snapshot();
        if (TERMINAL.has(view.status)) { ({ status, statusMessage } = view); break; }
        await new Promise((resolve) => setTimeout(resolve, view.suggestedPollIntervalMs ?? 500));
      }
    } else {
      const { outcome, lastTask } = await execution.settle({ onEvent });
      status = outcome.status;
      statusMessage = lastTask?.statusMessage;
      result = resultFromTaskOutcome(outcome);
    }
    emit(scenario, {
      client: 'ext-tasks', protocol, asTask: execution.kind === 'task', taskId, created: seen[0] ?? null,
      cancelledWhile: before, status, statusMessage, inputRequests: forms.length, result,
    });
  }

  await run('qbusiness', 'QBusinessQueryTool', QUESTION);
  await run('approval', 'QBusinessQueryTool', TICKET);
  await run('copilot', 'assign_copilot_to_issue', FINISHES);
  await run('cancel', 'assign_copilot_to_issue', SLOW, true);
  await client.close();
}

const where = parseArgs(process.argv.slice(2));
try {
  await (where.client === 'sdk-legacy' ? sdkLegacy(where) : extTasks(where));
} catch (error) {
  console.error(error);
  process.exit(1);
}
