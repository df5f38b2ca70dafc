"""The answer-recall study of §2.2 (Table 1, Figure 2): does reasoning before extracting keep more answers?

- `teacher`    Table 14 responses of a teacher (DeepSeek-R1 on the paper profiles), filtered to the correct ones
- `targets`    the two SFT sets: rational (<reason> + <extract>) and vanilla (<extract> only) targets
- `train`      the data stage: teacher, SFT sets, both LoRA runs (`python -m repro.stages.ar_study_train`)
- `recall`     exclusion rule, evidence cap, per-item AR records of both variants on two sets
- `tables`     Table 1, Figure 2's overlap categories, the exact McNemar test
- `figures`    Figure 2
- `paths`      where every artefact lives
"""
