"""Translator losses: normalized reconstruction, context correction (KL + continuation K/V), balance."""

import torch


def normalized_mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """MSE divided by the target's variance: 1.0 = predicting the mean, comparable across layers."""
    target = target.to(pred.device).float()
    return ((pred.float() - target) ** 2).mean() / target.var().clamp(min=1e-8)


def layers_nmse(preds: list, targets: list) -> torch.Tensor:
    return torch.stack([normalized_mse(p, t) for p, t in zip(preds, targets)]).mean()


def topk_kl(student_logits: torch.Tensor, teacher_logp: torch.Tensor, teacher_idx: torch.Tensor) -> torch.Tensor:
    """KL(teacher || student) per position, averaged, with the teacher known on its top-k tokens
    and the rest of its mass lumped into one bucket (student's mass outside those tokens).

    student_logits (T, V); teacher_logp, teacher_idx (T, k)."""
    student = student_logits.float().log_softmax(-1)
    s_top = student.gather(-1, teacher_idx.to(student.device))  # (T, k)
    t_top = teacher_logp.to(student.device).float()
    t_rest = (1 - t_top.exp().sum(-1)).clamp(min=1e-8)  # (T,)
    s_rest = (1 - s_top.exp().sum(-1)).clamp(min=1e-8)
    kl = (t_top.exp() * (t_top - s_top)).sum(-1) + t_rest * (t_rest.log() - s_rest.log())
    return kl.mean()


def top1_agreement(student_logits: torch.Tensor, teacher_idx: torch.Tensor) -> torch.Tensor:
    return (student_logits.argmax(-1) == teacher_idx[:, 0].to(student_logits.device)).float().mean()
