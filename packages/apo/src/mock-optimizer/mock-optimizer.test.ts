import { instructionFollowingAnswer } from "@agl/core/mock-llm";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_EDIT_INSTRUCTIONS,
  DEFAULT_GRADIENT_INSTRUCTIONS,
  type Experiment,
} from "../instructions.js";
import { FIXES, habitsSeen, mockArithmeticTasks, mockCritique, mockEdit } from "./index.js";

const run = (question: string, system: string, reward: number): Experiment => ({
  status: "succeeded",
  reward,
  conversations: [
    {
      messages: [
        { role: "system", content: system },
        { role: "user", content: question },
        { role: "assistant", content: instructionFollowingAnswer(`${system}\n${question}`) },
      ],
      tools: [],
    },
  ],
});

const text = (turns: Array<{ content: string }>) => turns.map((t) => t.content).join("\n");

describe("mock optimiser", () => {
  it("makes tasks whose kinds each need their own instructions", () => {
    const tasks = mockArithmeticTasks(8);
    expect(tasks.map((t) => t.question)).toHaveLength(8);
    const allFixes = Object.values(FIXES).join("\n");
    for (const t of tasks) expect(instructionFollowingAnswer(`${allFixes}\n${t.question}`)).toBe(t.answer);
    const numberOnly = tasks.filter(
      (t) => instructionFollowingAnswer(`${FIXES.numberOnly}\n${t.question}`) === t.answer,
    );
    expect(numberOnly.length).toBe(2); // the small single operations only
  });

  it("the critic names only the habits the runs show, through every built-in critique wording", () => {
    const experiments = [
      run("What is 2 + 3 * 4?", FIXES.numberOnly, 0),
      run("What is 5 + 6?", FIXES.numberOnly, 1),
    ];
    for (const gradient of DEFAULT_GRADIENT_INSTRUCTIONS) {
      const request = text(
        gradient.messages({ template: FIXES.numberOnly, experiments, maxExperimentChars: 4000 }),
      );
      expect(habitsSeen(request)).toEqual(["precedence"]);
    }
    const chatty = [run("What is 1200 + 34?", "Be nice.", 0)];
    const request = text(
      DEFAULT_GRADIENT_INSTRUCTIONS[0]!.messages({
        template: "Be nice.",
        experiments: chatty,
        maxExperimentChars: 4000,
      }),
    );
    expect(habitsSeen(request)).toEqual(["numberOnly", "plainDigits"]);
    expect(mockCritique(request)).toMatch(/only the number[\s\S]*without commas/);
  });

  it("the editor applies the critique: everything for a full revision, one fix for a single-fix request", () => {
    const critique = mockCritique("Sure! The answer is 1,234. What is 2 + 3 * 4? The answer is 20.");
    const [full, single] = DEFAULT_EDIT_INSTRUCTIONS;
    const template = "Be nice.\nQuestion: {question}";
    const edited = mockEdit(text(full!.messages({ template, critique, variables: ["question"] })));
    expect(edited).toBe(
      `<prompt>Be nice.\n${FIXES.numberOnly}\n${FIXES.precedence}\n${FIXES.plainDigits}\nQuestion: {question}</prompt>`,
    );
    const one = mockEdit(text(single!.messages({ template, critique, variables: ["question"] })));
    expect(one).toBe(`<prompt>Be nice.\n${FIXES.numberOnly}\nQuestion: {question}</prompt>`);
    expect(mockEdit("no template here")).toMatch(/could not find/);
  });
});
