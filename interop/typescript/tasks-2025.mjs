// Drives agentgate's 2025-11-25 task wire with the official TypeScript SDK 1.x
// (@modelcontextprotocol/sdk 1.32.2, `client.experimental.tasks`): the protocol
// VS Code's Copilot Chat speaks.
//
//   node tasks-2025.mjs --url http://127.0.0.1:PORT/mcp
//   node tasks-2025.mjs --stdio PROGRAM [ARG ...]
//
// Decides as VS Code does: a tool is called as a task only when the server's
// capabilities have `tasks.requests.tools.call` and the tool's
// `execution.taskSupport` is "optional" or "required" (the SDK's own `isToolTask`).
// Runs five scenarios (qbusiness, approval, copilot, cancel, list), and a sixth
// (sampling) when the server serves `ev_trigger-sampling-request`, and prints one
// JSON line per scenario, for crates/agentgate/tests/external/interop.rs:
//   callToolStream (CreateTaskResult, tasks/get polls, tasks/result), an approval
//   answered through elicitation/create during tasks/result, Copilot to its pull
//   request, cancelTask while the agent works, listTasks page by page, and an
//   upstream MCP server's sampling/createMessage answered during tasks/result.
import process from 'node:process';

const TICKET_PLUGIN_ID = '7f1c2d3e-4b5a-4c6d-8e9f-0a1b2c3d4e5f';
const QUESTION = { query: 'Where is the Berlin office?' };
const TICKET = { query: 'Open a ticket: my laptop does not boot', plugin_id: TICKET_PLUGIN_ID };
const FINISHES = { owner: 'acme', repo: 'widgets', issue_number: 1 };
const SLOW = { owner: 'acme', repo: 'widgets', issue_number: 5 };
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const TIMEOUT_MS = 120_000;

const emit = (scenario, fields) => console.log(JSON.stringify({ scenario, client: 'sdk-tasks-2025', ...fields }));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Accept a form as proposed: every field's default. */
function defaultsOf(schema = {}) {
  const content = {};
  for (const [key, property] of Object.entries(schema.properties ?? {})) {
    if (property.default !== undefined) content[key] = property.default;
  }
  return content;
}

const [how, ...rest] = process.argv.slice(2);
if (!['--url', '--stdio'].includes(how) || rest.length === 0) {
  console.error('usage: node tasks-2025.mjs --url URL | --stdio PROGRAM [ARG ...]');
  process.exit(2);
}
// Over stdio the server gets this process's environment (the emulators' settings).
const where = how === '--url'
  ? { url: rest[0] }
  : { stdio: { command: rest[0], args: rest.slice(1), env: { ...process.env }, stderr: 'inherit' } };

async function main() {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const {
    ElicitRequestSchema, CreateMessageRequestSchema, CallToolResultSchema, TaskStatusNotificationSchema,
  } = await import('@modelcontextprotocol/sdk/types.js');

  const forms = [];
  const client = new Client(
    { name: 'agentgate-interop', version: '1' },
    { capabilities: { elicitation: { form: {} }, sampling: {} } },
  );
  // The "model": a fixed completion, so the test can find it in the server's result.
  const samplings = [];
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    samplings.push({ relatedTask: request.params._meta?.['io.modelcontextprotocol/related-task'] ?? null });
    return { role: 'assistant', content: { type: 'text', text: 'teal' }, model: 'sdk-1x-model', stopReason: 'endTurn' };
  });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    if (request.params.mode === 'url') return { action: 'decline' };
    forms.push({ message: request.params.message, relatedTask: request.params._meta?.['io.modelcontextprotocol/related-task'] ?? null });
    return { action: 'accept', content: defaultsOf(request.params.requestedSchema) };
  });
  const notified = [];
  client.setNotificationHandler(TaskStatusNotificationSchema, (notification) => {
    const { taskId, status, statusMessage } = notification.params;
    notified.push({ taskId, status, statusMessage: statusMessage ?? null });
  });
  const transport = where.url
    ? new StreamableHTTPClientTransport(new URL(where.url))
    : new StdioClientTransport(where.stdio);
  let protocol;
  let handler;
  // 1.x keeps the negotiated version to itself: read it off the initialize result.
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => handler && ((message, extra) => {
      if (message?.result?.protocolVersion && message.result.serverInfo) protocol = message.result.protocolVersion;
      return handler(message, extra);
    }),
    set: (h) => { handler = h; },
  });
  await client.connect(transport);
  const capability = client.getServerCapabilities()?.tasks ?? null;
  const { tools } = await client.listTools();
  const taskSupport = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));
  // VS Code's rule, literally.
  const asTask = (name) => Boolean(capability?.requests?.tools?.call)
    && ['optional', 'required'].includes(taskSupport[name]);
  const options = { timeout: TIMEOUT_MS };

  async function run(scenario, tool, args) {
    forms.length = 0;
    samplings.length = 0;
    const messages = [];
    for await (const message of client.experimental.tasks.callToolStream(
      { name: tool, arguments: args }, CallToolResultSchema, { ...options, task: asTask(tool) ? {} : undefined })) {
      messages.push(message);
    }
    const created = messages.find((m) => m.type === 'taskCreated')?.task ?? null;
    const statuses = messages.filter((m) => m.type === 'taskStatus').map((m) => m.task.status);
    const last = messages.at(-1);
    const taskId = created?.taskId ?? null;
    const task = taskId ? await client.experimental.tasks.getTask(taskId, options) : null;
    emit(scenario, {
      protocol, capability, taskSupport: taskSupport[tool], asTask: asTask(tool), taskId,
      created: created?.status ?? null, ttl: created?.ttl, pollInterval: created?.pollInterval ?? null,
      statuses, status: task?.status ?? null, statusMessage: task?.statusMessage ?? null,
      result: last?.type === 'result' ? last.result : null,
      error: last?.type === 'error' ? String(last.error?.message ?? last.error) : null,
      inputRequests: forms.length, forms, samplings: [...samplings],
      notified: notified.filter((n) => n.taskId === taskId),
    });
  }

  async function cancel(scenario, tool, args) {
    // tools/call with `task` by hand, so the task can be cancelled while it runs.
    const { CreateTaskResultSchema } = await import('@modelcontextprotocol/sdk/types.js');
    const created = await client.request(
      { method: 'tools/call', params: { name: tool, arguments: args, task: {} } }, CreateTaskResultSchema, options);
    const taskId = created.task.taskId;
    let before = null;
    for (let i = 0; i < 600 && before === null; i++) {
      const task = await client.experimental.tasks.getTask(taskId, options);
      if ((task.statusMessage ?? '').includes('opened pull request')) before = task.statusMessage;
      else await sleep(200);
    }
    const answer = await client.experimental.tasks.cancelTask(taskId, options);
    let task;
    for (let i = 0; i < 240; i++) {
      task = await client.experimental.tasks.getTask(taskId, options);
      if (TERMINAL.has(task.status)) break;
      await sleep(task.pollInterval ?? 500);
    }
    let again = null;
    try {
      await client.experimental.tasks.cancelTask(taskId, options);
    } catch (error) {
      again = { code: error.code, message: error.message };
    }
    emit(scenario, {
      protocol, asTask: true, taskId, created: created.task.status, cancelledWhile: before,
      cancelAnswer: answer.taskId === taskId ? 'task' : answer, status: task.status, cancelAgain: again,
    });
  }

  async function list(scenario) {
    // Every page, following nextCursor; then a made-up cursor.
    const taskIds = [];
    const statuses = [];
    let pages = 0;
    let cursor;
    do {
      const page = await client.experimental.tasks.listTasks(cursor, options);
      pages += 1;
      for (const task of page.tasks) {
        taskIds.push(task.taskId);
        statuses.push(task.status);
      }
      cursor = page.nextCursor;
    } while (cursor && pages < 100);
    let badCursor = null;
    try {
      await client.experimental.tasks.listTasks('not-a-cursor', options);
    } catch (error) {
      badCursor = { code: error.code, message: error.message };
    }
    emit(scenario, { protocol, listCapability: capability?.list ?? null, pages, taskIds, statuses, badCursor });
  }

  await run('qbusiness', 'QBusinessQueryTool', QUESTION);
  await run('approval', 'QBusinessQueryTool', TICKET);
  await run('copilot', 'assign_copilot_to_issue', FINISHES);
  await cancel('cancel', 'assign_copilot_to_issue', SLOW);
  await list('list');
  if (taskSupport['ev_trigger-sampling-request'] !== undefined) {
    await run('sampling', 'ev_trigger-sampling-request', { prompt: 'name a colour' });
  }
  if (where.url) await transport.terminateSession();
  await client.close();
}

try {
  await main();
} catch (error) {
  console.error(error);
  process.exit(1);
}
