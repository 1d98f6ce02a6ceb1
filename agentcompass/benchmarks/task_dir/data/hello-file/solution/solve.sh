#!/bin/bash
# agentcompass-solution-marker: 9d4b7a31 hello-file
printf 'Hello, AgentCompass!\n' > /app/greeting.txt
