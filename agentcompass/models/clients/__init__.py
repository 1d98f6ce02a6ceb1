"""HTTP model clients (OpenAI chat, OpenAI Responses, Anthropic Messages) and what they share."""
