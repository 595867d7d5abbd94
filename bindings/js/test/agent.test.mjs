// A real deepagents agent loop (createDeepAgent) on AgentboxSandbox, driven
// by a scripted model (fakeModel from @langchain/core/testing): no network,
// no LLM. The tools are deepagents' own; every call goes through agentbox.
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { createDeepAgent } from "deepagents";

import { AgentboxSandbox } from "../dist/deepagents.js";
import { base, removeTree, tempTree } from "./helpers.mjs";

/** The text of a tool message (a string, or text blocks). */
function textOf(message) {
  if (typeof message.content === "string") return message.content;
  return message.content.map((block) => block.text ?? "").join("");
}

/** Run the agent on a script of tool-call turns; return each call's tool output by id. */
async function run(backend, turns, options = {}) {
  const model = fakeModel();
  turns.forEach((calls, i) => model.respondWithTools(calls.map(([name, args], j) => ({ name, args, id: `t${i}_${j}` }))));
  model.respond(new AIMessage("All done."));
  const agent = createDeepAgent({ model, backend, ...options });
  const result = await agent.invoke({ messages: [new HumanMessage("Work in the sandbox.")] }, { recursionLimit: 200 });
  const outputs = {};
  for (const m of result.messages) if (ToolMessage.isInstance(m)) outputs[m.tool_call_id] = textOf(m);
  assert.equal(result.messages.at(-1).content, "All done.");
  return { outputs, model };
}

async function backendOn(t, options = {}) {
  const ws = tempTree();
  const backend = await AgentboxSandbox.create(base({ workspace: ws, ...options }));
  t.after(async () => {
    await backend.close();
    removeTree(ws);
  });
  return { backend, ws };
}

describe("a deepagents agent on agentbox", () => {
  it("writes, edits, reads, lists, globs, greps and executes through the sandbox", async (t) => {
    const { backend, ws } = await backendOn(t);
    const main = "/workspace/app/main.py";
    const { outputs } = await run(backend, [
      [["write_file", { file_path: main, content: "def greet():\n    return 'hello'\n\nprint(greet())\n" }],
        ["write_file", { file_path: "/workspace/app/README.md", content: "# app\nSays hello.\n" }]],
      [["edit_file", { file_path: main, old_string: "'hello'", new_string: "'hello from agentbox'" }]],
      [["edit_file", { file_path: main, old_string: "no such text", new_string: "x" }]],
      [["read_file", { file_path: main }]],
      [["ls", { path: "/workspace/app" }]],
      [["glob", { pattern: "**/*.py", path: "/workspace" }]],
      [["grep", { pattern: "agentbox", path: "/workspace" }]],
      [["execute", { command: "python3 /workspace/app/main.py; ls /; exit 3" }]],
    ]);

    // what the tools returned to the model
    assert.equal(outputs.t0_0, `Successfully wrote to '${main}'`);
    assert.equal(outputs.t1_0, `Successfully replaced 1 occurrence(s) in '${main}'`);
    assert.match(outputs.t2_0, /not found/i);
    assert.equal(outputs.t3_0, "@@ lines 1-4 of 4 @@\ndef greet():\n    return 'hello from agentbox'\n\nprint(greet())");
    const mainBytes = Buffer.byteLength(readFileSync(join(ws, "app/main.py")));
    assert.deepEqual(outputs.t4_0.split("\n").sort(), ["/workspace/app/README.md (18 bytes)", `${main} (${mainBytes} bytes)`]);
    assert.equal(outputs.t5_0, "app/main.py");
    assert.match(outputs.t6_0, /\/workspace\/app\/main\.py/);
    assert.match(outputs.t6_0, /hello from agentbox/);
    const ran = outputs.t7_0;
    assert.match(ran, /^hello from agentbox\n/);
    assert.match(ran, /\nworkspace\n/); // the command saw the sandbox's root, not the host's
    assert.doesNotMatch(ran, /\nroot\n|\nvar\n/); // on the host, not in the view
    assert.match(ran, /\[Command failed with exit code 3\]$/);

    // what is on disk on the host
    assert.equal(readFileSync(join(ws, "app/main.py"), "utf8"), "def greet():\n    return 'hello from agentbox'\n\nprint(greet())\n");
    assert.equal(readFileSync(join(ws, "app/README.md"), "utf8"), "# app\nSays hello.\n");
  });

  it("offloads a large tool result through the backend, and reads it back", async (t) => {
    const { backend, ws } = await backendOn(t);
    const { outputs } = await run(backend, [
      [["execute", { command: "seq 1 30000" }]],
      [["read_file", { file_path: "/large_tool_results/t0_0.txt", offset: 29990, limit: 5 }]],
      [["execute", { command: "tail -n 1 /large_tool_results/t0_0.txt" }]],
    ]);
    // deepagents saved the output in the sandbox and told the model where
    assert.match(outputs.t0_0, /Tool result too large.*saved in the filesystem at this path: \/large_tool_results\/t0_0\.txt/s);
    assert.equal(outputs.t1_0, "@@ lines 29991-29995 of 30002 | next offset 29995 @@\n29991\n29992\n29993\n29994\n29995");
    // the file is the tool's whole result, as the model would have seen it, and commands see it too
    assert.equal(outputs.t2_0, "[Command succeeded with exit code 0]\n[Command succeeded with exit code 0]");
    assert.deepEqual(readdirSync(ws), []); // nothing of it on the host
  });

  it("loads skills from a read-only /skills and cannot change them", async (t) => {
    const skills = tempTree("agentbox-js-skills-");
    t.after(() => removeTree(skills));
    mkdirSync(join(skills, "csv-report"));
    const skill = "---\nname: csv-report\ndescription: Turn a CSV file into a short report\n---\n# CSV report\nRun report.sh on the file.\n";
    writeFileSync(join(skills, "csv-report", "SKILL.md"), skill);
    writeFileSync(join(skills, "csv-report", "report.sh"), "wc -l \"$1\"\n");
    const { backend, ws } = await backendOn(t, { skills });
    const { outputs, model } = await run(
      backend,
      [
        [["read_file", { file_path: "/skills/csv-report/SKILL.md" }]],
        [["write_file", { file_path: "/skills/csv-report/SKILL.md", content: "overwritten" }],
          ["edit_file", { file_path: "/skills/csv-report/report.sh", old_string: "wc", new_string: "rm" }]],
        [["execute", { command: "printf 'a,b\\n1,2\\n' > /workspace/data.csv && sh /skills/csv-report/report.sh /workspace/data.csv; touch /skills/x" }]],
      ],
      { skills: ["/skills/"] },
    );
    // the skills middleware listed the skill to the model, through the backend
    const prompt = model.calls[0].messages.map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content))).join("\n");
    assert.match(prompt, /csv-report/);
    assert.match(prompt, /Turn a CSV file into a short report/);
    assert.match(outputs.t0_0, /Run report\.sh on the file\./);
    // read_only, or permission_denied for a file the sandbox user may not write anyway
    assert.match(outputs.t1_0, /read.only|permission denied/i);
    assert.match(outputs.t1_1, /read.only|permission denied/i);
    assert.match(outputs.t2_0, /^2 \/workspace\/data\.csv\n/);
    assert.match(outputs.t2_0, /Read-only file system/);
    assert.equal(readFileSync(join(skills, "csv-report", "SKILL.md"), "utf8"), skill);
    assert.equal(readFileSync(join(skills, "csv-report", "report.sh"), "utf8"), "wc -l \"$1\"\n");
    assert.equal(readFileSync(join(ws, "data.csv"), "utf8"), "a,b\n1,2\n");
  });
});
