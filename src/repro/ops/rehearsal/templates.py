"""The chat templates of the mirror's causal LMs, verbatim as the hub repos ship them in tokenizer_config.json.

Source: TRL 1.16.0, `trl/chat_templates/qwen2_5.jinja` ("Original Qwen2.5 chat template") and
`trl/chat_templates/deepseek_r1_distill.jinja` ("Original DeepSeek-R1-Distill chat template, shipped byte-identically by
every distill checkpoint"). TRL compares a tokenizer's template with these files byte for byte to recognise the model,
and its weekly CI checks them against the hub repos; tests/test_rehearsal_mirror.py checks the copies below against
the installed TRL's.
"""

# Qwen/Qwen2.5-{1.5B,7B}-Instruct, and the checkpoints fine-tuned from them (EviOmni, Search-R1)
QWEN2_5_CHAT_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

# deepseek-ai/DeepSeek-R1-Distill-Qwen-32B (one line on the hub; cut here at Jinja tags only)
DEEPSEEK_R1_DISTILL_CHAT_TEMPLATE = (
    r'''{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}'''
    r'''{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='') %}'''
    r'''{%- for message in messages %}{%- if message['role'] == 'system' %}'''
    r'''{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}'''
    r'''{%- for message in messages %}{%- if message['role'] == 'user' %}'''
    r'''{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}'''
    r'''{%- if message['role'] == 'assistant' and message['content'] is none %}{%- set ns.is_tool = false -%}'''
    r'''{%- for tool in message['tool_calls']%}'''
    r'''{%- if not ns.is_first %}{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}'''
    r'''{%- set ns.is_first = true -%}'''
    r'''{%- else %}{{'\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}'''
    r'''{%- endif %}{%- endfor %}{%- endif %}'''
    r'''{%- if message['role'] == 'assistant' and message['content'] is not none %}'''
    r'''{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}'''
    r'''{%- set ns.is_tool = false -%}{%- else %}{% set content = message['content'] %}{% if '</think>' in content %}'''
    r'''{% set content = content.split('</think>')[-1] %}'''
    r'''{% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}'''
    r'''{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}'''
    r'''{%- if ns.is_output_first %}{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}'''
    r'''{%- set ns.is_output_first = false %}'''
    r'''{%- else %}{{'\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}'''
    r'''{%- endfor -%}{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}'''
    r'''{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\n'}}{% endif %}'''
)
