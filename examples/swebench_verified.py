import os

from agentcompass import run_evaluation

result = run_evaluation(
    benchmark="swebench_verified",
    harness="mini_swe_agent",
    environment="docker",
    model="gpt-5-mini",
    benchmark_params={"sample_ids": ["astropy__astropy-12907"]},
    model_base_url=os.environ["MODEL_BASE_URL"],
    model_api_key=os.environ["MODEL_API_KEY"],
)
print(result.status, result.metrics.get("pass@1"), result.run_dir)
