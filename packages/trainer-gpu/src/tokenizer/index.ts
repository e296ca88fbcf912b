export * from "./chat-template.js";
export * from "./messages.js";
export * from "./tokenizer.js";
export * from "./tool-calls.js";
